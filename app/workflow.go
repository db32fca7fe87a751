package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	// endpoint reports whether an agent receives messages at an endpoint;
	// a registry-driven step's agent that does is messaged by the run's
	// caller through the relay (relayStep) instead.
	endpoint func(ctx context.Context, agent string) bool
	// a2a reports whether an agent is an A2A agent: its step is the run's
	// caller's message through the A2A door (a2aStep).
	a2a func(agent string) bool
}

// errNoCaller is an A2A step without the run's caller to send it.
var errNoCaller = errors.New("an A2A agent's step needs the run's caller")

// Call implements workflow.Caller.
func (c stepCaller) Call(ctx context.Context, call workflow.Call) (workflow.Reply, error) {
	if c.a2a != nil && c.a2a(call.Agent) {
		if call.Caller == "" {
			return workflow.Reply{}, errNoCaller
		}
		return c.a2aStep(ctx, call)
	}
	if call.Sender != "" && c.endpoint != nil && c.endpoint(ctx, call.Agent) {
		return c.relayStep(ctx, call)
	}
	header := http.Header{"X-Correlation-Id": {call.RunID}}
	rec, err := callInProcess(ctx, c.handler(), scope.Acting{AgentID: call.Agent, RunID: call.RunID, Node: call.Node},
		"/v1/chat/completions", header, map[string]any{
			"model":    call.Model,
			"messages": []any{map[string]any{"role": "user", "content": call.Input}},
		})
	return replyOf(rec, err, call.Agent, stepAnswer)
}

// replyOf is a step's reply: the in-process call's request id, and the
// answer read from its body by read.
func replyOf(rec *stepResponse, err error, agent string, read func([]byte) (workflow.Answer, error)) (workflow.Reply, error) {
	reply := workflow.Reply{}
	if rec != nil {
		reply.RequestID = rec.header.Get("X-Request-Id")
	}
	if err != nil {
		return reply, err
	}
	a, err := read(rec.body.Bytes())
	if err != nil {
		return reply, fmt.Errorf("the answer of agent %s: %w", agent, err)
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

// callInProcess sends body (JSON) to path through the gateway's own handler
// as the agent of acting (a context value no network request can carry):
// the call crosses every stage an agent's own request does. The answer is
// held whole (up to maxStepAnswer); an error is a call that did not get a
// 200, with the gateway's reason.
func callInProcess(ctx context.Context, h http.Handler, acting scope.Acting, path string, header http.Header, body any) (*stepResponse, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("in-process request: %w", err)
	}
	return inProcess(ctx, h, acting, http.MethodPost, path, header, raw)
}

// inProcess is callInProcess with any method and a body as it is (nil for
// none).
func inProcess(ctx context.Context, h http.Handler, acting scope.Acting, method, path string, header http.Header, raw []byte) (*stepResponse, error) {
	ctx = scope.WithActing(ctx, acting)
	req, err := http.NewRequestWithContext(ctx, method, path, bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("in-process request: %w", err)
	}
	maps.Copy(req.Header, header)
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.RemoteAddr = "127.0.0.1:0" // in process
	rec := &stepResponse{header: http.Header{}}
	h.ServeHTTP(rec, req)
	switch {
	case ctx.Err() != nil:
		return rec, ctx.Err()
	case rec.overflow:
		return rec, fmt.Errorf("the answer of agent %s is larger than %d bytes", acting.AgentID, maxStepAnswer)
	case rec.status != http.StatusOK:
		return rec, fmt.Errorf("the call of agent %s was refused: %d %s", acting.AgentID, rec.status, errorMessage(rec.body.Bytes()))
	}
	return rec, nil
}

// stepResponse is the ResponseWriter of an in-process call.
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
