package messaging

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/sacpgw/gateway/compact"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/registry"
)

// No unchecked plan crosses the relay: an envelope whose payload is a
// compact SACP message (a plan) is checked against the registry's library,
// as POST /sacp/validate checks it, and against what its recipient declares
// it runs, before it is queued or relayed. What fails is never delivered.

// The verbs a plan may use without a library definition (compact SACP's
// structural join and the SPAWN_AGENT meta verbs).
const (
	verbJoin        = "join"
	verbDefine      = "define"
	verbInstantiate = "instantiate"
)

// carriesPlan reports whether payload is a compact SACP message: a JSON
// object with a member named plan. The name is compared without regard to
// ASCII case, so that a look-alike ("Plan") is checked, and refused by the
// validator, rather than passed on for a recipient that reads keys loosely.
// A payload that does not parse as an object is taken for one too (the
// validator then says what is wrong with it): fail closed.
func carriesPlan(payload json.RawMessage) bool {
	if len(payload) == 0 {
		return false
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(payload, &top); err != nil {
		return true
	}
	for k := range top {
		if asciiEqualFold(k, "plan") {
			return true
		}
	}
	return false
}

// asciiEqualFold compares ASCII letters case-insensitively and nothing else
// (Unicode folding would let "\u212a" pass for "k").
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// planStep is one [verb, tool, params] step of a plan, where it is.
type planStep struct {
	verb, tool string
	// label and path name the step as compact's validator does ("plan
	// step 2, parallel branch 1", "plan[1].parallel[0]").
	label, path string
}

// planSteps lists the steps of a plan the library's validator accepted:
// the top-level steps and the branches of parallel groups. The subtask is a
// message of its own (compact's PlanVerbs leaves it out too).
func planSteps(payload json.RawMessage) ([]planStep, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(payload, &top); err != nil {
		return nil, fmt.Errorf("decode plan: %w", err)
	}
	var plan []json.RawMessage
	if err := json.Unmarshal(top["plan"], &plan); err != nil {
		return nil, fmt.Errorf("decode plan: %w", err)
	}
	var steps []planStep
	for i, raw := range plan {
		var group struct {
			Parallel []json.RawMessage `json:"parallel"`
		}
		if len(raw) > 0 && raw[0] == '{' {
			if err := json.Unmarshal(raw, &group); err != nil {
				return nil, fmt.Errorf("decode plan step %d: %w", i+1, err)
			}
			for j, br := range group.Parallel {
				st, err := decodeStep(br)
				if err != nil {
					return nil, fmt.Errorf("decode plan step %d, parallel branch %d: %w", i+1, j+1, err)
				}
				st.label = fmt.Sprintf("plan step %d, parallel branch %d", i+1, j+1)
				st.path = fmt.Sprintf("plan[%d].parallel[%d]", i, j)
				steps = append(steps, st)
			}
			continue
		}
		st, err := decodeStep(raw)
		if err != nil {
			return nil, fmt.Errorf("decode plan step %d: %w", i+1, err)
		}
		st.label, st.path = fmt.Sprintf("plan step %d", i+1), fmt.Sprintf("plan[%d]", i)
		steps = append(steps, st)
	}
	return steps, nil
}

func decodeStep(raw json.RawMessage) (planStep, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) != 3 {
		return planStep{}, fmt.Errorf("not a [verb, tool, params] step")
	}
	var st planStep
	if json.Unmarshal(parts[0], &st.verb) != nil || json.Unmarshal(parts[1], &st.tool) != nil {
		return planStep{}, fmt.Errorf("verb and tool are not strings")
	}
	return st, nil
}

// canonicalVerb is the name of the verb a plan's name stands for (an alias
// such as "s" is "search", as supported_verbs lists it).
func canonicalVerb(lib *compact.Library, name string) string {
	if canon, ok := lib.Resolve(name); ok {
		return canon
	}
	return name
}

// planRefusal is a plan the gateway does not deliver. The sender gets it in
// compact SACP's ERR shape (writePlanRefusal); the audit trail and the
// counters see it as any refusal (Unwrap).
type planRefusal struct {
	// code is one of compact's validation codes (compact.Code*), the ones
	// POST /sacp/validate answers with.
	code, reason, path string
}

func (p *planRefusal) Error() string { return "plan refused: " + p.code + ": " + p.reason }

// Unwrap is the refusal as the rest of the gateway records it: 422 with
// the compact code.
func (p *planRefusal) Unwrap() error {
	param := "payload"
	if p.path != "" {
		param += "." + p.path
	}
	return &apierror.Error{Status: http.StatusUnprocessableEntity, Type: apierror.TypeInvalidRequest, Code: p.code, Param: param, Message: p.reason}
}

// planErr is the ERR answer to a refused plan: the one ERR shape of
// compact SACP, as POST /sacp/validate answers it ({"status":"ERR","code",
// "details","path"}), with the refused message's id as reply_to so that the
// sender can tie it to what it sent.
type planErr struct {
	compact.Result
	ReplyTo string `json:"reply_to,omitempty"`
}

// writePlanRefusal answers 422 with the ERR object.
func writePlanRefusal(w http.ResponseWriter, r *http.Request, msgID string, p *planRefusal) {
	if ex := scope.Lookup(r.Context()); ex != nil {
		ex.Status, ex.ErrCode = http.StatusUnprocessableEntity, p.code
	}
	httpx.WriteJSON(w, r, http.StatusUnprocessableEntity, planErr{
		Result:  compact.Result{Status: compact.StatusErr, Code: p.code, Details: p.reason, Path: p.path},
		ReplyTo: msgID,
	})
}

// library is the registry's verb and tool library. A registry whose
// spawned agents cannot be read still gives the last known library, as
// /sacp/validate uses it.
func (s *Service) library(ctx context.Context) *compact.Library {
	lib, err := s.reg.Library(ctx)
	if err != nil {
		s.log.Warn("registry: checking the plan against the last known library", "error", err.Error())
	}
	return lib
}

// checkPayloadPlan validates the plan in payload, if it carries one, with
// the library; it returns the plan's steps (nil for a payload without a
// plan: callers ask carriesPlan first) or the refusal.
func checkPayloadPlan(lib *compact.Library, payload json.RawMessage) ([]planStep, *planRefusal) {
	if !carriesPlan(payload) {
		return nil, nil
	}
	if res := lib.Validate(payload); !res.Valid() {
		return nil, &planRefusal{code: res.Code, reason: res.Details, path: res.Path}
	}
	steps, err := planSteps(payload)
	if err != nil {
		// The validator accepted what this reading cannot follow: refused,
		// never passed on unchecked.
		return nil, &planRefusal{code: compact.CodeMalformedPlan, reason: err.Error(), path: "plan"}
	}
	return steps, nil
}

// runnableBy checks that agent e declares every verb and tool of the plan.
// The fail-closed reading: an agent that declares no supported_verbs (or no
// supported_tools) runs no plan at all, rather than any plan.
func runnableBy(lib *compact.Library, e registry.Entry, steps []planStep) *planRefusal {
	if len(e.SupportedVerbs) == 0 {
		return &planRefusal{code: compact.CodeUnknownVerb, path: "plan",
			reason: fmt.Sprintf("agent %q declares no supported_verbs: it cannot be sent a plan", e.AgentName)}
	}
	for _, st := range steps {
		switch st.verb {
		case verbJoin:
			// Structural: it closes a parallel group and needs no verb of
			// the recipient's. Its tool, when it is one of the library's,
			// is a tool the recipient must have.
			if _, ok := lib.Tool(st.tool); ok && !slices.Contains(e.SupportedTools, st.tool) {
				return unsupportedTool(e, st)
			}
			continue
		case verbDefine, verbInstantiate:
			return &planRefusal{code: compact.CodeUnknownVerb, path: st.path + "[0]",
				reason: fmt.Sprintf("%s: verb %q belongs to SPAWN_AGENT messages, which only POST /registry/spawn runs; they are not relayed to agents", st.label, st.verb)}
		}
		if !supportsVerb(lib, e.SupportedVerbs, st.verb) {
			return &planRefusal{code: compact.CodeUnknownVerb, path: st.path + "[0]",
				reason: fmt.Sprintf("%s: agent %q does not support verb %s (its supported_verbs: %s)", st.label, e.AgentName, quoteClip(st.verb), strings.Join(e.SupportedVerbs, ", "))}
		}
		if !slices.Contains(e.SupportedTools, st.tool) {
			return unsupportedTool(e, st)
		}
	}
	return nil
}

func unsupportedTool(e registry.Entry, st planStep) *planRefusal {
	have := "none"
	if len(e.SupportedTools) > 0 {
		have = strings.Join(e.SupportedTools, ", ")
	}
	return &planRefusal{code: compact.CodeUnknownTool, path: st.path + "[1]",
		reason: fmt.Sprintf("%s: agent %q does not support tool %s (its supported_tools: %s)", st.label, e.AgentName, quoteClip(st.tool), have)}
}

// supportsVerb compares by the verbs' names, so that an alias in the plan
// matches the verb an agent lists.
func supportsVerb(lib *compact.Library, supported []string, verb string) bool {
	want := canonicalVerb(lib, verb)
	for _, s := range supported {
		if canonicalVerb(lib, s) == want {
			return true
		}
	}
	return false
}

func quoteClip(s string) string { return fmt.Sprintf("%q", clip(s)) }

// checkPlan is the accept step: the plan of the envelope (after
// redaction: what is checked is what would be delivered) against the
// library, then against each target. A target that cannot run the plan is
// left out of a broadcast or group send (recorded in the checks); when no
// target can, or the one recipient cannot, the message is refused.
func (s *Service) checkPlan(r *http.Request, in *send) error {
	if !carriesPlan(in.msg.Payload) {
		in.checks["plan"] = "none"
		return nil
	}
	lib := s.library(r.Context())
	steps, refusal := checkPayloadPlan(lib, in.msg.Payload)
	if refusal != nil {
		in.checks["plan"] = map[string]any{"verdict": "invalid", "code": refusal.code}
		return refusal
	}
	var (
		able    []registry.Entry
		skipped = map[string]any{}
		first   *planRefusal
	)
	for _, t := range in.targets {
		if p := runnableBy(lib, t, steps); p != nil {
			skipped[t.AgentName] = p.code + ": " + p.reason
			if first == nil {
				first = p
			}
			continue
		}
		able = append(able, t)
	}
	if first != nil && len(able) == 0 {
		in.checks["plan"] = map[string]any{"verdict": "unsupported", "code": first.code, "refused": skipped}
		return first
	}
	in.checks["plan"] = map[string]any{"verdict": "pass", "steps": len(steps), "left_out": skipped}
	in.targets = able
	return nil
}
