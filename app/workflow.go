package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/workflow"
)

// maxStepAnswer bounds a workflow step's answer held in memory.
const maxStepAnswer = 8 << 20

// stepCaller makes a workflow step's call through the gateway's own HTTP
// handler, in process, as the node's agent (scope.Acting): the step is
// identified, limited, checked by RBAC and Rego, given the protocol prompt,
// validated, redacted and audited exactly like the agent's own request.
type stepCaller struct {
	handler func() http.Handler
}

// Call implements workflow.Caller.
func (c stepCaller) Call(ctx context.Context, call workflow.Call) (workflow.Reply, error) {
	body, err := json.Marshal(map[string]any{
		"model":    call.Model,
		"messages": []any{map[string]any{"role": "user", "content": call.Input}},
	})
	if err != nil {
		return workflow.Reply{}, fmt.Errorf("step request: %w", err)
	}
	ctx = scope.WithActing(ctx, scope.Acting{AgentID: call.Agent, RunID: call.RunID, Node: call.Node})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return workflow.Reply{}, fmt.Errorf("step request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Correlation-Id", call.RunID)
	req.RemoteAddr = "127.0.0.1:0" // in process
	rec := &stepResponse{header: http.Header{}}
	c.handler().ServeHTTP(rec, req)
	reply := workflow.Reply{RequestID: rec.header.Get("X-Request-Id")}
	if err := ctx.Err(); err != nil {
		return reply, err
	}
	if rec.overflow {
		return reply, fmt.Errorf("the answer of agent %s is larger than %d bytes", call.Agent, maxStepAnswer)
	}
	if rec.status != http.StatusOK {
		return reply, fmt.Errorf("the call of agent %s was refused: %d %s", call.Agent, rec.status, errorMessage(rec.body.Bytes()))
	}
	a, err := stepAnswer(rec.body.Bytes())
	if err != nil {
		return reply, fmt.Errorf("the answer of agent %s: %w", call.Agent, err)
	}
	reply.Answer = a
	return reply, nil
}

// stepAnswer reads the validated SACP object out of a chat completion. The
// gateway produced it, but it is read strictly all the same.
func stepAnswer(b []byte) (workflow.Answer, error) {
	var resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := jsonv2.Unmarshal(b, &resp); err != nil {
		return workflow.Answer{}, fmt.Errorf("not a chat completion: %w", err)
	}
	if len(resp.Choices) != 1 {
		return workflow.Answer{}, fmt.Errorf("%d choices, want 1", len(resp.Choices))
	}
	var a workflow.Answer
	if err := jsonv2.Unmarshal([]byte(resp.Choices[0].Message.Content), &a); err != nil {
		return workflow.Answer{}, fmt.Errorf("not a SACP answer (is the agent's response_format json_standard?): %w", err)
	}
	if a.Data == nil {
		a.Data = map[string]any{}
	}
	return a, nil
}

// errorMessage is the message of an OpenAI-shaped error body.
func errorMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error.Message == "" {
		return strings.TrimSpace(string(b[:min(len(b), 200)]))
	}
	return e.Error.Message
}

// stepResponse is the ResponseWriter of an in-process step call.
type stepResponse struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	overflow bool
}

func (r *stepResponse) Header() http.Header { return r.header }

func (r *stepResponse) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *stepResponse) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len()+len(b) > maxStepAnswer {
		r.overflow = true
		return 0, fmt.Errorf("answer over %d bytes", maxStepAnswer)
	}
	return r.body.Write(b)
}

// Flush lets the pipeline's streaming paths run (a step never streams).
func (r *stepResponse) Flush() {}
