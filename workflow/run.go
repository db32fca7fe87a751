package workflow

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/sacpgw/gateway/internal/globalctx"
)

// Status is a run's state.
type Status string

// The states of a run. IN_PROGRESS and WAITING_FOR_HUMAN are live; the
// other three are final.
const (
	InProgress      Status = "IN_PROGRESS"
	WaitingForHuman Status = "WAITING_FOR_HUMAN"
	Completed       Status = "COMPLETED"
	Failed          Status = "FAILED"
	Cancelled       Status = "CANCELLED"
)

// Final reports whether nothing more happens to a run in state s.
func (s Status) Final() bool { return s == Completed || s == Failed || s == Cancelled }

// Answer is a node's validated SACP answer, as the governed call returned it
// (redacted where the agent's redaction applies).
type Answer struct {
	Thought      string         `json:"thought"`
	Status       string         `json:"status"`
	Data         map[string]any `json:"data"`
	Message      string         `json:"message"`
	NextStepHint string         `json:"next_step_hint,omitempty"`
}

// Step is one call of a node's agent.
type Step struct {
	Node  string `json:"node"`
	Agent string `json:"agent"`
	// Attempt counts the visits of this node in the run, from 1.
	Attempt int `json:"attempt"`
	// Status is the answer's status, or "error" when the step failed.
	Status string `json:"status"`
	// Input is the text the agent was given.
	Input  string  `json:"input"`
	Answer *Answer `json:"answer,omitempty"`
	// Next is where the run went after this step (a node, end or failed,
	// or the node asked to retry); empty while suspended.
	Next string `json:"next,omitempty"`
	// Error says why the step failed.
	Error string `json:"error,omitempty"`
	// Pick is how a registry-driven node's agent was chosen.
	Pick *Pick `json:"pick,omitempty"`
	// RequestID is the governed call's request id: its llm.* audit entries.
	RequestID string    `json:"request_id,omitempty"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
}

// Context is the run's Global Context (internal/globalctx): entities each
// written only by the node that owns it, an append-only history kept by
// the engine, and artifacts (blob references).
type Context = globalctx.Context[Status]

// HistoryEntry is one thing an agent did in the run.
type HistoryEntry = globalctx.HistoryEntry

// Artifact is a document a run produced, by reference.
type Artifact = globalctx.Artifact

// Run is one execution of a workflow: what the API shows (View), and what
// the engine keeps to continue it (in the state backend, so another
// replica can take it over).
type Run struct {
	View
	Caller string         `json:"caller"`
	Input  map[string]any `json:"input"`

	// Outputs are each node's last answer, for templates and conditions.
	Outputs map[string]*Answer `json:"outputs"`
	// Note is added to the current node's next input: a retry instruction
	// or a person's answer.
	Note string `json:"note,omitempty"`
	// Negotiations counts the retry_with_instruction round trips taken.
	Negotiations int `json:"negotiations"`
}

// View is what GET /workflows/{name}/runs/{id} returns: the run without the
// engine's bookkeeping.
type View struct {
	ID       string  `json:"run_id"`
	Workflow string  `json:"workflow"`
	Status   Status  `json:"status"`
	Current  string  `json:"current_node"`
	Steps    []Step  `json:"steps"`
	Context  Context `json:"context"`
	// Path is the nodes visited, in order (the review page draws it).
	Path []string `json:"path"`
	// Error says why a run FAILED (or who CANCELLED it).
	Error string `json:"error,omitempty"`
	// EscalationID and ReviewURL are the open review of a suspended run.
	EscalationID string `json:"escalation_id,omitempty"`
	ReviewURL    string `json:"review_url,omitempty"`

	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// setStatus moves the run to s; its Global Context says the same.
func (r *Run) setStatus(s Status) {
	r.Status, r.Context.Status = s, s
}

// shown is the run as the API shows it: steps a list even before the first.
func (r *Run) shown() View {
	v := r.View
	if v.Steps == nil {
		v.Steps = []Step{}
	}
	return v
}

// clone is a deep copy, so a stored run is never shared with a caller
// that changes it. The values under its maps are JSON values (objects,
// arrays, strings, numbers, booleans, null), as the Redis store keeps them.
func (r *Run) clone() (*Run, error) {
	c := *r
	c.Input = copyObject(r.Input)
	c.Steps = slices.Clone(r.Steps)
	for i := range c.Steps {
		if a := c.Steps[i].Answer; a != nil {
			c.Steps[i].Answer = a.clone()
		}
	}
	c.Path = slices.Clone(r.Path)
	c.Context.Entities = copyObject(r.Context.Entities)
	c.Context.History = slices.Clone(r.Context.History)
	c.Context.Artifacts = slices.Clone(r.Context.Artifacts)
	if r.Outputs != nil {
		c.Outputs = make(map[string]*Answer, len(r.Outputs))
		for k, a := range r.Outputs {
			c.Outputs[k] = a.clone()
		}
	}
	return &c, nil
}

func (a *Answer) clone() *Answer {
	if a == nil {
		return nil
	}
	c := *a
	c.Data = copyObject(a.Data)
	return &c
}

func copyObject(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = copyValue(v)
	}
	return c
}

func copyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return copyObject(x)
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = copyValue(e)
		}
		return c
	}
	return v // strings, numbers, booleans, nil: immutable
}

// root is what templates and conditions read: the run's input, its
// context, and each node's last answer under the node's name.
func (r *Run) root() map[string]any {
	m := map[string]any{"input": jsonValue(r.Input), "context": jsonValue(r.Context)}
	for node, a := range r.Outputs {
		m[node] = jsonValue(a)
	}
	return m
}

// jsonValue is v as JSON-decoded Go values (maps, slices, float64...), the
// form conditions and templates read.
func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}
