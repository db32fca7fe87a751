package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/workflow/definition"
)

// A registry-driven node (agent: {verb, output_type, text, ...}) has no
// fixed agent: at each step the registry is asked, as the run's caller, for
// the agents that match; the best one the caller may message is called.
// When none matches, the registry's SPAWN_AGENT suggestion goes through
// the spawn route (its policy decides; a person may be asked), and once
// the new agent is registered the step asks again and calls it (seed 001
// Appendix D's retry), at most max_spawns times per run.

// KindPick is the audit entry of a registry-driven node's choice.
const KindPick = "workflow.pick"

// pickPoll is how often a step waiting for a spawn looks again: at the
// person's decision, then at the registry until the new agent shows.
const pickPoll = 200 * time.Millisecond

// Picker asks the registry on the engine's behalf. The gateway wires it to
// its own registry routes (POST /registry/query and /registry/spawn, GET
// /agent/status/{id}), called in process as the run's caller, so the
// registry's limits, policy and audit apply as to the caller's own
// requests, and this package imports no door.
type Picker interface {
	// Find returns the agents matching q, best first, each with whether
	// caller may message it; with none, the registry's spawn suggestion.
	Find(ctx context.Context, caller string, q Query) (Found, error)
	// Spawn sends a SPAWN_AGENT message as caller.
	Spawn(ctx context.Context, caller string, msg json.RawMessage) (SpawnOutcome, error)
	// SpawnState is the state of caller's escalated spawn requestID:
	// SpawnPending, SpawnApproved or SpawnRejected.
	SpawnState(ctx context.Context, caller, requestID string) (string, error)
}

// Query is what a registry-driven node asks for. Action is what the caller
// would send the agent: the verb, or the node's name without one.
type Query struct {
	Verb       string   `json:"verb,omitempty"`
	Inputs     []string `json:"inputs,omitempty"`
	OutputType string   `json:"output_type,omitempty"`
	Text       string   `json:"text,omitempty"`
	Action     string   `json:"action"`
}

// Candidate is one agent the registry found.
type Candidate struct {
	Agent  string  `json:"agent"`
	Score  float64 `json:"score"`
	Method string  `json:"method,omitempty"`
	// Refused says why the caller may not message the agent ("" if it may).
	Refused string `json:"refused,omitempty"`
	// Model is the agent's default model, for an agent called as itself
	// (no endpoint) on a node that names none.
	Model string `json:"-"`
}

// Found is the registry's answer: its ranking method, the candidates best
// first and, when there are none, the SPAWN_AGENT message it suggests.
type Found struct {
	Ranking    string
	Candidates []Candidate
	Suggestion json.RawMessage
}

// The outcomes of a spawn, and the states of an escalated one.
const (
	SpawnApproved  = "approved"
	SpawnEscalated = "escalated"
	SpawnRejected  = "rejected"
	SpawnPending   = "pending"
)

// SpawnOutcome is the spawn policy's answer.
type SpawnOutcome struct {
	Status    string   `json:"status"`
	Agent     string   `json:"agent"`
	RequestID string   `json:"request_id,omitempty"`
	ReviewURL string   `json:"review_url,omitempty"`
	Reasons   []string `json:"reasons,omitempty"`
}

// Pick is what a step of a registry-driven node records of its choice.
type Pick struct {
	Query   Query   `json:"query"`
	Ranking string  `json:"ranking"`
	Chosen  string  `json:"chosen,omitempty"`
	Score   float64 `json:"score,omitempty"`
	// model is the chosen agent's default model (Candidate.Model).
	model string
	// Skipped are better-ranked agents the caller may not message.
	Skipped []Candidate `json:"skipped,omitempty"`
	// Spawn is the spawn this step asked for, when none matched.
	Spawn *SpawnOutcome `json:"spawn,omitempty"`
}

// pickQuery is the registry query of a registry-driven node.
func pickQuery(node *definition.Node) Query {
	p := node.Pick
	action := p.Verb
	if action == "" {
		action = node.Name
	}
	return Query{Verb: p.Verb, Inputs: p.Inputs, OutputType: p.OutputType, Text: p.Text, Action: action}
}

// pick chooses the agent of registry-driven node for this step of run,
// spawning one when none matches (and the run may still spawn). The
// choice, or why there is none, is on the returned Pick either way.
func (e *Engine) pick(ctx context.Context, wf *definition.Workflow, node *definition.Node, run *Run, timeout time.Duration) (*Pick, error) {
	if e.picker == nil {
		return nil, fmt.Errorf("node %s is registry-driven, and this gateway has no registry to ask", node.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pk := &Pick{Query: pickQuery(node)}
	found, err := e.find(ctx, run.Caller, pk)
	if err != nil || pk.Chosen != "" {
		return pk, err
	}
	if len(found.Candidates) > 0 {
		return pk, fmt.Errorf("no agent matching the node may be messaged by %s: %s", run.Caller, refusals(pk.Skipped))
	}
	if err := e.spawnFor(ctx, wf, node, run, pk, found); err != nil {
		return pk, err
	}
	// The spawn's retry: ask again until the new agent is in the answers.
	for {
		if err := sleep(ctx, pickPoll); err != nil {
			return pk, fmt.Errorf("agent %s was spawned, and the registry did not offer it within %s", pk.Spawn.Agent, timeout)
		}
		if _, err := e.find(ctx, run.Caller, pk); err != nil || pk.Chosen != "" {
			return pk, err
		}
	}
}

// find asks the registry and records on pk the best candidate the caller
// may message, and the better ones it may not.
func (e *Engine) find(ctx context.Context, caller string, pk *Pick) (Found, error) {
	found, err := e.picker.Find(ctx, caller, pk.Query)
	if err != nil {
		return found, fmt.Errorf("registry query: %w", err)
	}
	pk.Ranking, pk.Skipped = found.Ranking, nil
	for _, c := range found.Candidates {
		if c.Refused == "" {
			pk.Chosen, pk.Score, pk.model = c.Agent, c.Score, c.Model
			return found, nil
		}
		pk.Skipped = append(pk.Skipped, c)
	}
	return found, nil
}

// spawnFor asks for the agent the registry suggests and waits until it is
// registered: at once when the policy approves, after a person's approval
// when it escalates.
func (e *Engine) spawnFor(ctx context.Context, wf *definition.Workflow, node *definition.Node, run *Run, pk *Pick, found Found) error {
	switch {
	case node.Pick.SpawnEndpoint == "":
		return fmt.Errorf("no agent matches node %s, and the node names no spawn_endpoint for a new one", node.Name)
	case spawnsOf(run) >= wf.MaxSpawns:
		return fmt.Errorf("no agent matches node %s, and the run has spawned max_spawns (%d) agents already", node.Name, wf.MaxSpawns)
	case len(found.Suggestion) == 0:
		return fmt.Errorf("no agent matches node %s, and the registry suggests no agent to spawn", node.Name)
	}
	msg, err := withEndpoint(found.Suggestion, node.Pick.SpawnEndpoint)
	if err != nil {
		return err
	}
	out, err := e.picker.Spawn(ctx, run.Caller, msg)
	if err != nil {
		return fmt.Errorf("spawn: %w", err)
	}
	pk.Spawn = &out
	switch out.Status {
	case SpawnApproved:
		return nil
	case SpawnEscalated:
		return e.awaitSpawn(ctx, run.Caller, out)
	}
	return fmt.Errorf("spawn of %s rejected: %s", out.Agent, strings.Join(out.Reasons, "; "))
}

// awaitSpawn waits for a person's decision on an escalated spawn, within
// the step's time.
func (e *Engine) awaitSpawn(ctx context.Context, caller string, out SpawnOutcome) error {
	for {
		state, err := e.picker.SpawnState(ctx, caller, out.RequestID)
		switch {
		case err != nil && ctx.Err() == nil:
			return fmt.Errorf("spawn of %s: its review %s: %w", out.Agent, out.RequestID, err)
		case state == SpawnApproved:
			return nil
		case state == SpawnRejected:
			return fmt.Errorf("spawn of %s rejected by a person (review %s)", out.Agent, out.RequestID)
		}
		if sleep(ctx, pickPoll) != nil {
			return fmt.Errorf("spawn of %s: nobody decided review %s within the step's time", out.Agent, out.RequestID)
		}
	}
}

// withEndpoint is the suggested SPAWN_AGENT message with endpoint in its
// instantiate step's params: where the new agent receives the step.
func withEndpoint(suggestion json.RawMessage, endpoint string) (json.RawMessage, error) {
	var msg map[string]any
	if err := json.Unmarshal(suggestion, &msg); err != nil {
		return nil, fmt.Errorf("the registry's spawn suggestion: %w", err)
	}
	plan, _ := msg["plan"].([]any)
	for _, s := range plan {
		step, _ := s.([]any)
		if len(step) == 3 && step[0] == "instantiate" {
			if params, ok := step[2].(map[string]any); ok {
				params["endpoint"] = endpoint
				return json.Marshal(msg)
			}
		}
	}
	return nil, errors.New("the registry's spawn suggestion has no instantiate step")
}

// spawnsOf counts the spawns the run's steps asked for.
func spawnsOf(r *Run) int {
	n := 0
	for _, s := range r.Steps {
		if s.Pick != nil && s.Pick.Spawn != nil {
			n++
		}
	}
	return n
}

func refusals(cs []Candidate) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Agent + " (" + c.Refused + ")"
	}
	return strings.Join(parts, "; ")
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// writePick records a registry-driven step's choice (or why there is none).
func (e *Engine) writePick(ctx context.Context, run *Run, node string, pk *Pick, err error) {
	sum := audit.Members("run_id", run.ID, "workflow", run.Workflow, "node", node, "query", pk.Query,
		"ranking", pk.Ranking, "chosen", pk.Chosen, "score", pk.Score)
	if len(pk.Skipped) > 0 {
		sum.Any("skipped", pk.Skipped)
	}
	if pk.Spawn != nil {
		sum.Any("spawn", pk.Spawn)
	}
	if err != nil {
		sum.Str("error", err.Error())
	}
	e.write(ctx, audit.Record{Kind: KindPick, AgentID: run.Caller, Object: sum})
}
