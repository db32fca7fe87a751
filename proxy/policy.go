package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/sacp"
)

// Policies is what the proxy asks of the Rego engine (policy.Engine).
type Policies interface {
	ChatDeny(ctx context.Context, input map[string]any) (policy.ChatDecision, error)
	Guardrails(ctx context.Context, input map[string]any) (policy.GuardrailDecision, error)
}

var _ Policies = (*policy.Engine)(nil)

// AgentInputs holds each agent's input.agent document, converted to OPA's
// representation once rather than on every decision: the configured
// agents' at startup, a run-time agent's (the admin API's) the first time
// it is seen and again whenever its entry changed. The engine settles a
// decision per agent by partial evaluation only for a converted document,
// and recognises the agent by it: a run-time agent whose document were
// converted per request would be evaluated in full every time.
type AgentInputs struct {
	files   map[string]any
	runtime sync.Map // agent id → *runtimeInput
	n       atomic.Int64
}

// runtimeInput is a run-time agent's document and its conversion.
type runtimeInput struct {
	doc   map[string]any
	value any
}

// maxRuntimeInputs bounds the run-time agents remembered; past it, a new
// agent's document is converted per decision (and evaluated in full).
const maxRuntimeInputs = 4096

// NewAgentInputs prepares the documents of every configured agent.
func NewAgentInputs(agents map[string]*roster.Agent) *AgentInputs {
	in := &AgentInputs{files: make(map[string]any, len(agents))}
	for id, a := range agents {
		in.files[id] = policy.Preconvert(policy.AgentInput(a))
	}
	return in
}

func (in *AgentInputs) of(a *roster.Agent) any {
	if in == nil {
		return policy.AgentInput(a)
	}
	if v, ok := in.files[a.ID]; ok {
		return v
	}
	// The store hands out a fresh entry per lookup: the document, not the
	// pointer, says whether the agent changed.
	doc := policy.AgentInput(a)
	if c, ok := in.runtime.Load(a.ID); ok {
		if c := c.(*runtimeInput); reflect.DeepEqual(c.doc, doc) {
			return c.value
		}
	} else if in.n.Add(1) > maxRuntimeInputs {
		in.n.Add(-1)
		return doc
	}
	c := &runtimeInput{doc: doc, value: policy.Preconvert(doc)}
	in.runtime.Store(a.ID, c)
	return c.value
}

// ChatPolicy is the stage applying data.gateway.chat.deny to every chat
// request. A non-empty set of reasons is a 403 policy_denied naming them;
// an engine that errs or finds the decision undefined denies too (fail
// closed), and says so.
func ChatPolicy(p Policies, agents *AgentInputs) Stage {
	return StageFunc(func(w http.ResponseWriter, r *http.Request, next http.Handler) error {
		ex := scope.Get(r.Context())
		// The body passed the strict reading; the policies see it as read,
		// converted in one pass, and only when the decision reads more
		// than the reading guarantees (an object with ex.Messages
		// messages). request is the neutral form whatever the client
		// spoke; dialect says what that was.
		dialect := ex.Dialect
		if dialect == "" {
			dialect = "chat"
		}
		var request any = policy.RawJSON(ex.Body)
		if ex.Messages > 0 {
			request = policy.ChatRequest{Body: ex.Body, Messages: ex.Messages}
			if read, ok := ex.BodyValue.(policy.ChatRequest); ok && sameBytes(read.Body, ex.Body) {
				// The value the reader built in its pass over this body.
				request = read
			}
		}
		in := map[string]any{"agent": agents.of(ex.Agent), "request": request, "model": ex.Model, "dialect": dialect}
		d, _ := p.ChatDeny(r.Context(), in)
		verdict := scope.Verdict{Check: scope.CheckPolicy, Verdict: "allow", DecisionID: d.DecisionID, Revision: d.Revision}
		if d.Deny {
			verdict.Verdict, verdict.Reasons, verdict.FailClosed = "deny", d.Reasons, d.FailClosed
			ex.Check(verdict)
			return apierror.Forbidden("Denied by policy: " + strings.Join(d.Reasons, "; ") + ".")
		}
		ex.Check(verdict)
		next.ServeHTTP(w, r)
		return nil
	})
}

// sameBytes reports whether a and b are the same bytes in memory (not
// merely equal ones): a value read from a body describes that body only.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// requestReader is the engine's advice on whether an agent's chat decision
// reads the request past the reader's guarantees (policy.Engine).
type requestReader interface {
	ChatReadsRequest(agent any) bool
}

// policyReads is, for the chat reader, whether an agent's chat policy
// reads the request; nil when the engine gives no such advice.
func policyReads(p Policies, agents *AgentInputs) func(*roster.Agent) bool {
	rr, ok := p.(requestReader)
	if !ok {
		return nil
	}
	return func(a *roster.Agent) bool { return rr.ChatReadsRequest(agents.of(a)) }
}

// guard applies data.gateway.guardrails.response to a validated answer
// (SACP's guardrails; docs/policy-authoring.md, guardrails.response): it may
// force status "failure" and withhold the message.
func guard(ctx context.Context, p Policies, agents *AgentInputs, scan *dataScan, ex *scope.Exchange, resp *sacp.Response) {
	if p == nil {
		return
	}
	// The validated data, converted in one pass (as the chat input is).
	var data any
	if v, err := policy.JSONInput(resp.Data); err == nil {
		data = v
	}
	obj := map[string]any{"thought": resp.Thought, "status": resp.Status, "data": data, "message": resp.Message}
	if resp.NextStepHint != "" {
		obj["next_step_hint"] = resp.NextStepHint
	}
	obj["sensitive_data"] = sensitive(scan)
	d, _ := p.Guardrails(ctx, map[string]any{"agent": agents.of(ex.Agent), "response": obj})
	verdict := scope.Verdict{Check: scope.CheckGuardrails, Verdict: "pass", DecisionID: d.DecisionID, Revision: d.Revision,
		RedactMessage: d.RedactMessage, Reason: d.Reason, FailClosed: d.FailClosed}
	if d.Status != "" && d.Status != resp.Status {
		verdict.Verdict, verdict.From = "forced_status", resp.Status
		resp.Status = d.Status
	}
	if d.RedactMessage {
		resp.Message = fmt.Sprintf("[REDACTED:guardrail] %s", d.Reason)
	}
	ex.Check(verdict)
}

// dataScan is one redaction pass over a validated answer's data: the
// guardrail reads which detectors found something, the redaction uses the
// rewritten bytes, so the data is scanned once.
type dataScan struct {
	out json.RawMessage
	res redact.Result
	err error
}

// scanData scans data with red; nil when there is nothing to scan.
func scanData(red *redact.Redactor, data json.RawMessage) *dataScan {
	if red == nil || len(data) == 0 {
		return nil
	}
	out, res, err := red.JSON(data)
	return &dataScan{out: out, res: res, err: err}
}

// sensitive names, sorted, the redaction detectors that found something in
// an answer's data (member names and values): what SACP's redaction
// guardrail means by a failure that "contains sensitive data", so that a
// failure carrying only an error code keeps its message. Empty, never nil:
// a rule reads it with count().
func sensitive(scan *dataScan) []string {
	found := []string{}
	switch {
	case scan == nil:
		return found
	case scan.err != nil:
		// Validated data is JSON; a reading error is counted as sensitive
		// so that the guardrail errs on the side of withholding.
		return []string{"unreadable"}
	}
	for name := range scan.res.Counts {
		found = append(found, name)
	}
	if b := scan.res.Blocked; b != "" && scan.res.Counts[b] == 0 {
		found = append(found, b)
	}
	slices.Sort(found)
	return found
}
