package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	jsonv2 "github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/sacp"
	"github.com/sacpgw/gateway/workflow"
)

// A workflow node whose agent is an A2A agent (agents.yaml a2a:) takes its
// step as the run's caller sending the step's input to the agent through
// the gateway's own A2A door, in process: the message is decided, redacted,
// limited and audited exactly as the caller's own A2A call would be, and
// the workflow package imports no door. The step waits for the task's end
// within the node's timeout; the final artifact becomes the step's data.

// a2aPoll is how often a step looks at a task the agent still works on:
// each look is a request of the caller's rate_limit.
const a2aPoll = time.Second

// servesA2A reports whether agent is an A2A agent the A2A door serves now.
func (a *App) servesA2A(agent string) bool { return a.a2a != nil && a.a2a.Serves(agent) }

// a2aStep sends call's input to its A2A agent as a message of the run's
// caller and reads the task's end into the step's answer.
func (c stepCaller) a2aStep(ctx context.Context, call workflow.Call) (workflow.Reply, error) {
	acting := scope.Acting{AgentID: call.Caller, RunID: call.RunID, Node: call.Node}
	msg := sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart(call.Input))
	reply := workflow.Reply{}
	var sent sdk.StreamResponse
	id, err := c.a2aRPC(ctx, acting, call.Agent, "SendMessage", &sdk.SendMessageRequest{Message: msg}, &sent)
	reply.RequestID = id
	if err != nil {
		return reply, err
	}
	var task *sdk.Task
	switch ev := sent.Event.(type) {
	case *sdk.Message:
		// The agent answered without a task: its message is the result.
		reply.Answer = a2aAnswer(ev.Parts)
		return reply, nil
	case *sdk.Task:
		task = ev
	default:
		return reply, fmt.Errorf("the answer of agent %s: SendMessage returned neither a task nor a message", call.Agent)
	}
	for a2aWaits(task) {
		select {
		case <-ctx.Done():
			c.a2aCancel(ctx, acting, call.Agent, task.ID)
			return reply, ctx.Err()
		case <-time.After(a2aPoll):
		}
		next := &sdk.Task{}
		if _, err := c.a2aRPC(ctx, acting, call.Agent, "GetTask", &sdk.GetTaskRequest{ID: task.ID}, next); err != nil {
			if ctx.Err() != nil {
				c.a2aCancel(ctx, acting, call.Agent, task.ID)
			}
			return reply, err
		}
		task = next
	}
	reply.Answer, err = a2aTaskAnswer(call.Agent, task)
	return reply, err
}

// a2aWaits reports whether the step keeps waiting for task: it is not
// final, and not a question for the run (one a person answers on the A2A
// door's review, a2a.human_input, is waited for).
func a2aWaits(t *sdk.Task) bool {
	switch t.Status.State {
	case sdk.TaskStateInputRequired, sdk.TaskStateAuthRequired:
		_, reviewed := t.Metadata["gateway_review"]
		return reviewed
	}
	return !t.Status.State.Terminal()
}

// a2aTaskAnswer is the step's answer of a task that stopped: completed, its
// last artifact; waiting for input, a question that pauses the run for a
// person (as a SACP clarification_needed); else the step's error.
func a2aTaskAnswer(agent string, t *sdk.Task) (workflow.Answer, error) {
	switch t.Status.State {
	case sdk.TaskStateCompleted:
		if len(t.Artifacts) == 0 {
			return workflow.Answer{Status: sacp.StatusSuccess, Data: map[string]any{}}, nil
		}
		return a2aAnswer(t.Artifacts[len(t.Artifacts)-1].Parts), nil
	case sdk.TaskStateInputRequired, sdk.TaskStateAuthRequired:
		q := a2aStatusText(t)
		if q == "" {
			q = "(the agent gave no question)"
		}
		return workflow.Answer{Status: sacp.StatusClarificationNeeded, Message: q, Data: map[string]any{
			"a2a_task_id": string(t.ID), "a2a_context_id": t.ContextID, "a2a_state": string(t.Status.State)}}, nil
	}
	reason := ""
	if s := a2aStatusText(t); s != "" {
		reason = ": " + s
	}
	return workflow.Answer{}, fmt.Errorf("the A2A task %s of agent %s ended %s%s", t.ID, agent, t.Status.State, reason)
}

// a2aStatusText is the text of a task's status message ("" for none).
func a2aStatusText(t *sdk.Task) string {
	if t.Status.Message == nil {
		return ""
	}
	return partsText(t.Status.Message.Parts)
}

// a2aAnswer maps result parts into a step's answer: the first data part
// that is an object is the data (another value is data.value), else the
// text is data.text; the text is the answer's message either way. File
// parts are not carried.
func a2aAnswer(parts sdk.ContentParts) workflow.Answer {
	a := workflow.Answer{Status: sacp.StatusSuccess, Message: partsText(parts)}
	for _, p := range parts {
		d := p.Data()
		if d == nil {
			continue
		}
		if m, ok := d.(map[string]any); ok {
			a.Data = m
		} else {
			a.Data = map[string]any{"value": d}
		}
		return a
	}
	a.Data = map[string]any{"text": a.Message}
	return a
}

// partsText joins the text parts.
func partsText(parts sdk.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

// a2aCancel cancels a task the step stops waiting for (its timeout, or the
// run's end), so that the agent does not work on for nobody. Best effort.
func (c stepCaller) a2aCancel(ctx context.Context, acting scope.Acting, agent string, task sdk.TaskID) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = c.a2aRPC(cctx, acting, agent, "CancelTask", &sdk.CancelTaskRequest{ID: task}, &sdk.Task{})
}

// a2aRPC makes one JSON-RPC call of the A2A door as acting and decodes its
// result into out; it returns the call's request id. An A2A error is the
// step's error, with the door's (redacted) message.
func (c stepCaller) a2aRPC(ctx context.Context, acting scope.Acting, agent, method string, params, out any) (string, error) {
	body := map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
	header := http.Header{sdk.SvcParamVersion: {"1.0"}, "X-Correlation-Id": {acting.RunID}}
	rec, err := callInProcess(ctx, c.handler(), acting, "/a2a/"+url.PathEscape(agent), header, body)
	id := ""
	if rec != nil {
		id = rec.header.Get("X-Request-Id")
	}
	if err != nil {
		return id, err
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	// The door produced it; it is read strictly all the same (no member
	// twice, none in another case).
	if err := jsonv2.Unmarshal(rec.body.Bytes(), &resp); err != nil {
		return id, fmt.Errorf("the A2A answer of agent %s to %s: %w", agent, method, err)
	}
	switch {
	case resp.Error != nil:
		return id, fmt.Errorf("A2A %s to agent %s refused: %d %s", method, agent, resp.Error.Code, resp.Error.Message)
	case len(resp.Result) == 0:
		return id, fmt.Errorf("the A2A answer of agent %s to %s has no result", agent, method)
	}
	if err := json.Unmarshal(resp.Result, out); err != nil {
		return id, fmt.Errorf("the A2A answer of agent %s to %s: %w", agent, method, err)
	}
	return id, nil
}
