package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/envelope"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/mailbox"
	"github.com/sacpgw/gateway/messaging"
	"github.com/sacpgw/gateway/registry"
	"github.com/sacpgw/gateway/sacp"
	"github.com/sacpgw/gateway/workflow"
)

// registryPicker answers a workflow's registry-driven nodes through the
// gateway's own registry routes, in process, as the run's caller: the
// query and the spawn are limited, decided and audited like the caller's
// own requests. Of the agents found, only those the caller may message
// (the relay's RBAC) and that can take a step (an endpoint, or the SACP
// JSON protocol) are offered.
type registryPicker struct {
	handler  func() http.Handler
	registry *registry.Registry
	// relay is the messaging service, nil when it is not served (then no
	// agent may be messaged).
	relay func() *messaging.Service
}

// Find implements workflow.Picker.
func (p registryPicker) Find(ctx context.Context, caller string, q workflow.Query) (workflow.Found, error) {
	inputs := q.Inputs
	if inputs == nil {
		inputs = []string{}
	}
	rec, err := callInProcess(ctx, p.handler(), scope.Acting{AgentID: caller}, "/registry/query", nil, map[string]any{
		"query": registry.Query{Text: q.Text, Verb: q.Verb, Inputs: inputs, OutputType: q.OutputType}, "top_k": registry.MaxTopK,
	})
	if err != nil {
		return workflow.Found{}, err
	}
	var list registry.QueryList
	if err := json.Unmarshal(rec.body.Bytes(), &list); err != nil {
		return workflow.Found{}, fmt.Errorf("registry answer: %w", err)
	}
	found := workflow.Found{Ranking: list.Ranking}
	for _, m := range list.Data {
		c := workflow.Candidate{Agent: m.AgentName, Score: m.Score, Method: m.Method}
		c.Refused, c.Model = p.refusal(ctx, caller, m.AgentName, q.Action)
		found.Candidates = append(found.Candidates, c)
	}
	if list.Suggestion != nil && list.Suggestion.Spawn != nil {
		if found.Suggestion, err = json.Marshal(list.Suggestion.Spawn); err != nil {
			return workflow.Found{}, fmt.Errorf("registry suggestion: %w", err)
		}
	}
	return found, nil
}

// refusal says why caller may not have agent take a step with action, or
// "" when it may; model is the default model of an agent without an
// endpoint, which the step calls as itself.
func (p registryPicker) refusal(ctx context.Context, caller, agent, action string) (refused, model string) {
	relay := p.relay()
	if relay == nil {
		return "agent messaging is not served by this gateway", ""
	}
	if az := relay.MayMessage(caller, agent, action); !az.Allowed {
		return "RBAC: " + az.Reason, ""
	}
	e, ok, err := p.registry.Lookup(ctx, agent)
	switch {
	case err != nil || !ok:
		return "not in the registry", ""
	case e.Endpoint != "":
		return "", ""
	}
	if a := relay.Configured(agent); a != nil && a.StandardProtocol() {
		return "", a.DefaultModel()
	}
	return "it has no endpoint and does not answer in the SACP JSON protocol: it cannot take a step", ""
}

// Spawn implements workflow.Picker: POST /registry/spawn as caller. The
// new agent's token in the answer is dropped here: the step reaches the
// agent at its endpoint, and the token is never stored or logged.
func (p registryPicker) Spawn(ctx context.Context, caller string, msg json.RawMessage) (workflow.SpawnOutcome, error) {
	rec, err := inProcess(ctx, p.handler(), scope.Acting{AgentID: caller}, http.MethodPost, "/registry/spawn", nil, msg)
	if rec == nil {
		return workflow.SpawnOutcome{}, err
	}
	switch rec.status {
	case http.StatusCreated, http.StatusAccepted:
	case http.StatusForbidden:
		return workflow.SpawnOutcome{Status: workflow.SpawnRejected, Reasons: []string{errorMessage(rec.body.Bytes())}}, nil
	default:
		if err == nil {
			err = fmt.Errorf("unexpected status %d", rec.status)
		}
		return workflow.SpawnOutcome{}, err
	}
	var res registry.SpawnResult
	if err := json.Unmarshal(rec.body.Bytes(), &res); err != nil {
		return workflow.SpawnOutcome{}, fmt.Errorf("spawn answer: %w", err)
	}
	return workflow.SpawnOutcome{Status: res.Status, Agent: res.AgentName, RequestID: res.RequestID,
		ReviewURL: res.HumanReviewURL, Reasons: res.Reasons}, nil
}

// SpawnState implements workflow.Picker: GET /agent/status/{id} as caller.
func (p registryPicker) SpawnState(ctx context.Context, caller, requestID string) (string, error) {
	rec, err := inProcess(ctx, p.handler(), scope.Acting{AgentID: caller}, http.MethodGet, "/agent/status/"+url.PathEscape(requestID), nil, nil)
	if err != nil {
		return "", err
	}
	var st struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal(rec.body.Bytes(), &st); err != nil {
		return "", fmt.Errorf("review status: %w", err)
	}
	switch st.State {
	case "APPROVED", "COMPLETED":
		return workflow.SpawnApproved, nil
	case "REJECTED", "EXPIRED":
		return workflow.SpawnRejected, nil
	}
	return workflow.SpawnPending, nil
}

// hasEndpoint reports whether agent receives messages at an endpoint.
func (a *App) hasEndpoint(ctx context.Context, agent string) bool {
	e, ok, err := a.registry.Lookup(ctx, agent)
	return err == nil && ok && e.Endpoint != ""
}

// relayStep sends a registry-driven step to its agent's endpoint as a SAM
// REQUEST from the run's caller, through the relay (RBAC, the messages
// policy, redaction, audit, the thread of the run's correlation_id), and
// reads the SACP answer from the RESPONSE's payload.data.
func (c stepCaller) relayStep(ctx context.Context, call workflow.Call) (workflow.Reply, error) {
	msg := map[string]any{
		"message_id":     "wf-" + mailbox.NewID(),
		"correlation_id": call.RunID,
		"timestamp":      time.Now().UTC().Format(time.RFC3339Nano),
		"sender":         map[string]any{"agent_id": call.Sender},
		"recipient":      map[string]any{"agent_id": call.Agent},
		"message_type":   "REQUEST",
		"payload": map[string]any{"action": call.Action, "data": map[string]any{"input": call.Input},
			"context": map[string]any{"run_id": call.RunID, "node": call.Node}},
	}
	if d, ok := ctx.Deadline(); ok {
		msg["metadata"] = map[string]any{"timeout_ms": max(1, time.Until(d).Milliseconds())}
	}
	rec, err := callInProcess(ctx, c.handler(), scope.Acting{AgentID: call.Sender, RunID: call.RunID, Node: call.Node},
		"/relay/messages", nil, msg)
	return replyOf(rec, err, call.Agent, relayAnswer)
}

// relayAnswer reads the SACP answer out of a relayed RESPONSE: its
// payload.data, checked as a json_standard agent's answer is.
func relayAnswer(b []byte) (workflow.Answer, error) {
	m, err := envelope.Decode(b)
	if err != nil {
		return workflow.Answer{}, fmt.Errorf("not an envelope: %w", err)
	}
	switch m.Type {
	case envelope.Response:
	case envelope.Error:
		if m.Error != nil {
			return workflow.Answer{}, fmt.Errorf("ERROR %s: %s", m.Error.Code, m.Error.Message)
		}
		return workflow.Answer{}, errors.New("an ERROR")
	default:
		return workflow.Answer{}, fmt.Errorf("a %s, not a RESPONSE carrying an answer", m.Type)
	}
	var p struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil || len(p.Data) == 0 {
		return workflow.Answer{}, errors.New("the RESPONSE has no payload.data")
	}
	out := (*sacp.Validator)(nil).Check(string(p.Data))
	if !out.Valid {
		return workflow.Answer{}, fmt.Errorf("payload.data is not a SACP answer: %s", strings.Join(out.Errors, "; "))
	}
	r := out.Response
	a := workflow.Answer{Thought: r.Thought, Status: r.Status, Message: r.Message, NextStepHint: r.NextStepHint}
	if err := jsonv2.Unmarshal(r.Data, &a.Data); err != nil {
		return workflow.Answer{}, fmt.Errorf("payload.data.data: %w", err)
	}
	if a.Data == nil {
		a.Data = map[string]any{}
	}
	return a, nil
}
