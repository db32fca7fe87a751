package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	a2asdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/sacpgw/gateway/internal/browsertest"
)

// TestA2AInputRequiredOnReviewPageInChromium: an A2A agent (a2a-go
// server) asks its caller (a2a-go client) a question; as the agent's
// questions go to a person, a reviewer signs in on the review page in a
// real headless Chromium, reads the question, writes the answer as the
// comment and approves; the agent gets the answer as the task's next
// message and the task completes.
func TestA2AInputRequiredOnReviewPageInChromium(t *testing.T) {
	b := browsertest.Start(t, browsertest.Skip(t, "the A2A review page"))
	ag := newA2AAgent(t)
	g := newA2AGateway(t, ag)
	c, _ := a2aClient(t, g, "tok-caller")
	res, err := c.SendMessage(t.Context(), textMessage("please ask me", "summarize"))
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	task, ok := res.(*a2asdk.Task)
	if !ok || task.Status.State != a2asdk.TaskStateInputRequired {
		t.Fatalf("result = %#v, want a task waiting for input", res)
	}
	review, _ := task.Metadata["gateway_review"].(map[string]any)
	id, _ := review["escalation_id"].(string)
	if id == "" {
		t.Fatalf("no review: %+v", task.Metadata)
	}
	for i, step := range []chromedp.Action[chromedp.Void]{
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(g.srv.URL + "/review/" + id),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "tok-ops-lead"),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("content")),
	} {
		if err := chromedp.Do(b.Ctx, step); err != nil {
			t.Fatalf("sign in and open the review page: step %d: %v", i, err)
		}
	}
	if got := b.Text(t, "request-type"); got != "A2A_INPUT" {
		t.Errorf("request type %q", got)
	}
	var q map[string]string
	if err := json.Unmarshal([]byte(b.Text(t, "content")), &q); err != nil || q["question"] != "Which quarter?" || q["task_id"] != string(task.ID) {
		t.Fatalf("the page shows %v (%v), want the agent's question and task", q, err)
	}
	if got := b.Text(t, "escalation-reason"); !strings.Contains(got, "next message") {
		t.Errorf("escalation reason %q", got)
	}
	if err := chromedp.Do(b.Ctx,
		chromedp.SendKeys(chromedp.ID("comment"), "Q3 2026"),
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.ID("closed")),
	); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("the pages reported problems:\n%s", strings.Join(p, "\n"))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		got, err := c.GetTask(ctx, &a2asdk.GetTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if got.Status.State == a2asdk.TaskStateCompleted {
			raw, _ := json.Marshal(got.Artifacts)
			if !strings.Contains(string(raw), "Q3 2026") {
				t.Fatalf("the agent did not get the reviewer's answer: %s", raw)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
