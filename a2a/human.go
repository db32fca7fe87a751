package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/sacpgw/gateway/internal/escalation"
)

// waiting are the tasks whose question waits for a person, by agent and
// task: the escalation's id. Kept in this process.
type waiting struct {
	mu sync.Mutex
	by map[string]string
}

func (w *waiting) get(agent, task string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.by[agent+"\x00"+task]
}

// put records id unless the task waits already; it reports whether it did.
func (w *waiting) put(agent, task, id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := agent + "\x00" + task
	if _, ok := w.by[k]; ok {
		return false
	}
	w.by[k] = id
	return true
}

func (w *waiting) done(agent, task string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.by, agent+"\x00"+task)
}

// question is what a person is shown: the task and the agent's question.
type question struct {
	Agent     string `json:"agent"`
	Caller    string `json:"caller"`
	TaskID    string `json:"task_id"`
	ContextID string `json:"context_id"`
	State     string `json:"state"`
	Question  string `json:"question"`
}

// inputState is the state of an event that asks for input
// (input-required, auth-required), "" for any other.
func inputState(ev sdk.Event) sdk.TaskState {
	var st sdk.TaskState
	switch e := ev.(type) {
	case *sdk.Task:
		st = e.Status.State
	case *sdk.TaskStatusUpdateEvent:
		st = e.Status.State
	}
	if st == sdk.TaskStateInputRequired || st == sdk.TaskStateAuthRequired {
		return st
	}
	return ""
}

// statusMessage is the message of a task's or an update's status.
func statusMessage(ev sdk.Event) *sdk.Message {
	switch e := ev.(type) {
	case *sdk.Task:
		return e.Status.Message
	case *sdk.TaskStatusUpdateEvent:
		return e.Status.Message
	}
	return nil
}

// askPerson opens a review for an event (already redacted) that asks for
// input, once per question, when the agent's questions go to a person;
// the event the caller gets says so in its metadata. It returns the
// review's id ("" when none was opened).
func (d *Door) askPerson(ctx context.Context, cl *call, ev sdk.Event) (string, error) {
	st := inputState(ev)
	if st == "" || !cl.target.A2A.HumanInput || d.opener == nil {
		return "", nil
	}
	info := ev.TaskInfo()
	if d.waiting.get(cl.target.ID, string(info.TaskID)) != "" {
		return "", nil
	}
	q := question{Agent: cl.target.ID, Caller: cl.caller.ID, TaskID: string(info.TaskID), ContextID: info.ContextID, State: string(st),
		Question: textOf(statusMessage(ev))}
	content, err := json.Marshal(q)
	if err != nil {
		return "", fmt.Errorf("a2a: question: %w", err)
	}
	opened, err := d.opener.Open(ctx, escalation.Request{Type: escalation.TypeA2AInput, AgentID: cl.caller.ID, SessionID: cl.ex.SessionID,
		Action: "answer " + cl.target.ID + "'s question", Content: string(content),
		Reason: fmt.Sprintf("Agent %q asks for input on task %s of %q. Approve with your answer as the comment: it is sent as the task's next message. Reject: the task is canceled.",
			cl.target.ID, info.TaskID, cl.caller.ID)})
	if err != nil {
		return "", sdk.NewError(sdk.ErrInternalError, "The agent's question could not be sent to a person.")
	}
	d.waiting.put(cl.target.ID, string(info.TaskID), opened.ID)
	review := map[string]any{"escalation_id": opened.ID}
	if opened.ReviewURL != "" {
		review["review_url"] = opened.ReviewURL
	}
	switch e := ev.(type) {
	case *sdk.Task:
		e.SetMeta("gateway_review", review)
	case *sdk.TaskStatusUpdateEvent:
		e.SetMeta("gateway_review", review)
	}
	return opened.ID, nil
}

// textOf is the text of a message's text parts.
func textOf(m *sdk.Message) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range m.Parts {
		if p != nil {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}

// Resolve is the approval service's Resolver for escalation.TypeA2AInput:
// approved, the person's comment is sent to the agent as the task's next
// message; rejected (or expired), the task is canceled. Either is audited.
func (d *Door) Resolve(ctx context.Context, dec escalation.Decided) error {
	var q question
	if err := json.Unmarshal([]byte(dec.Content), &q); err != nil {
		return fmt.Errorf("a2a: resolve %s: %w", dec.ID, err)
	}
	defer d.waiting.done(q.Agent, q.TaskID)
	c := d.conf.Load()
	target, caller := c.agents[q.Agent], c.agents[q.Caller]
	if target == nil || target.A2A == nil || caller == nil {
		return fmt.Errorf("a2a: resolve %s: agent %q or %q is no longer configured", dec.ID, q.Agent, q.Caller)
	}
	st, err := d.cards.get(ctx, target)
	if err != nil {
		return fmt.Errorf("a2a: resolve %s: %w", dec.ID, err)
	}
	up := a2aclient.NewJSONRPCTransport(st.endpoint, d.client)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cl := &call{caller: caller, target: target, conf: c, card: st, rpc: &rpcCall{method: mSend, taskID: q.TaskID}, up: up}
	sum := map[string]any{"dialect": "a2a", "agent": q.Agent, "task_id": q.TaskID, "context_id": q.ContextID,
		"escalation_id": dec.ID, "by": dec.Reviewer, "decision": dec.State}
	if !dec.Approved {
		cl.rpc.method, sum["method"] = mCancel, mCancel
		_, err = up.CancelTask(ctx, params(), &sdk.CancelTaskRequest{ID: sdk.TaskID(q.TaskID)})
	} else {
		answer := dec.Comment
		if c.red != nil {
			answer, _ = c.red.String(answer)
		}
		msg := &sdk.Message{ID: sdk.NewMessageID(), Role: sdk.MessageRoleUser, TaskID: sdk.TaskID(q.TaskID), ContextID: q.ContextID,
			Parts: sdk.ContentParts{sdk.NewTextPart(answer)}}
		sum["method"], sum["message_id"], sum["part_kinds"] = mSend, msg.ID, []string{"text"}
		_, err = up.SendMessage(ctx, params(), &sdk.SendMessageRequest{Message: msg, Config: &sdk.SendMessageConfig{ReturnImmediately: true}})
	}
	if err != nil {
		sum["status"], sum["error"] = "error", "the agent did not take the answer"
	}
	if aerr := d.write(ctx, caller.ID, nil, KindRequest, sum, ""); aerr != nil || err != nil {
		return errors.Join(unwrapURL(err), aerr)
	}
	return nil
}
