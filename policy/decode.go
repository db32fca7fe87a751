package policy

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Decoding of the decision rules' values. A value of the wrong shape is a
// policy bug; it fails closed exactly like an error or an undefined result.

// summary is what shadow evaluation compares: key decides agreement, text
// is reported.
type summary struct {
	key        string
	text       string
	failClosed bool
	cause      string
}

// malformed is a decision value of the wrong shape.
type malformed struct{ msg string }

func (m *malformed) Error() string { return m.msg }

func badShape(format string, args ...any) error {
	return &malformed{msg: fmt.Sprintf(format, args...)}
}

// decodeOr decodes the value of a successful outcome with decode; when the
// evaluation failed or the value is of the wrong shape, the decision is
// the one failed builds from the cause (the violation rule and message),
// with nothing of the partly decoded value. The caller adds the decision
// id and revision.
func decodeOr[D any](out outcome, decode func(v any) (D, error), failed func(rule, msg string) D) D {
	if out.err != nil {
		return failed(out.rule, out.err.Error())
	}
	d, err := decode(out.value)
	if err != nil {
		return failed(RulePolicyMalformed, err.Error())
	}
	return d
}

// fields reads the members of a decision object. The first member of the
// wrong shape is err, and every read after it is the zero value, so that
// a decoder reads its members in order and checks err once.
type fields struct {
	m   map[string]any
	err error
}

// object reads a decision value that must be an object; what names it.
func object(v any, what string) fields {
	m, ok := v.(map[string]any)
	if !ok {
		return fields{err: badShape("%s is %s, want an object", what, kind(v))}
	}
	return fields{m: m}
}

// get is the member key; ok is false when it is absent or null, or an
// earlier member was of the wrong shape.
func (f *fields) get(key string) (raw any, ok bool) {
	if f.err != nil {
		return nil, false
	}
	raw = f.m[key]
	return raw, raw != nil
}

// fail records the first member of the wrong shape.
func (f *fields) fail(err error) {
	if f.err == nil {
		f.err = err
	}
}

// req reads a required string.
func (f *fields) req(key string) string {
	if _, ok := f.get(key); !ok && f.err == nil {
		f.fail(badShape("decision has no %q", key))
	}
	return f.str(key)
}

// oneOf reads a required string that must be one of allowed; what names
// it and want lists allowed in the error.
func (f *fields) oneOf(key string, allowed map[string]bool, what, want string) string {
	s := f.req(key)
	if f.err == nil && !allowed[s] {
		f.fail(badShape("%s %q is not %s", what, s, want))
	}
	return s
}

// str reads an optional string; absent is "".
func (f *fields) str(key string) string {
	raw, ok := f.get(key)
	if !ok {
		return ""
	}
	s, ok := raw.(string)
	if !ok {
		f.fail(badShape("decision %q is %s, want a string", key, kind(raw)))
	}
	return s
}

// number reads an optional number; absent is 0.
func (f *fields) number(key string) float64 {
	raw, ok := f.get(key)
	if !ok {
		return 0
	}
	switch n := raw.(type) {
	case json.Number:
		x, err := n.Float64()
		if err != nil {
			f.fail(badShape("decision %q: %v", key, err))
		}
		return x
	case float64:
		return n
	case int:
		return float64(n)
	}
	f.fail(badShape("decision %q is %s, want a number", key, kind(raw)))
	return 0
}

// strs reads an optional array (or set) of strings; absent is empty.
func (f *fields) strs(key string) []string {
	raw, ok := f.get(key)
	if !ok {
		if f.err != nil {
			return nil
		}
		return []string{}
	}
	list, err := stringList(raw, key)
	f.fail(err)
	return list
}

var approvalStatuses = map[string]bool{"approved": true, "rejected": true, "escalated": true, "clarification_needed": true}

func approvalFrom(out outcome) ApprovalDecision {
	d := decodeOr(out, decodeApproval, func(rule, msg string) ApprovalDecision {
		return ApprovalDecision{
			Status:     "rejected",
			Confidence: 0,
			Feedback:   "rejected because the approval policy could not decide (fail closed): " + msg,
			Violations: []Violation{{
				Rule:        rule,
				Description: "the approval policy could not decide: " + msg,
				Suggestion:  "retry later; if this persists, the gateway's operators must fix the policy",
			}},
			Suggestions: []string{"retry later; if this persists, the gateway's operators must fix the policy"},
			Constraints: []string{},
			FailClosed:  true,
			Error:       rule + ": " + msg,
		}
	})
	d.DecisionID, d.Revision = out.id, out.revision
	return d
}

func decodeApproval(v any) (ApprovalDecision, error) {
	f := object(v, "approval decision")
	d := ApprovalDecision{
		Status:     f.oneOf("status", approvalStatuses, "approval decision status", "approved, rejected, escalated or clarification_needed"),
		Confidence: f.number("confidence"),
	}
	if f.err == nil && (d.Confidence < 0 || d.Confidence > 1) {
		return d, badShape("approval decision confidence %v is outside 0..1", d.Confidence)
	}
	d.Feedback = f.str("feedback")
	d.ApprovedLocation = f.str("approved_location")
	d.EscalationReason = f.str("escalation_reason")
	d.Suggestions = f.strs("suggestions")
	d.Constraints = f.strs("constraints")
	raw, _ := f.get("violations")
	if f.err != nil {
		return d, f.err
	}
	var err error
	if d.Violations, err = violations(raw); err != nil {
		return d, err
	}
	if d.Status == "approved" && len(d.Violations) > 0 {
		return d, badShape("approval decision is approved with %d violation(s)", len(d.Violations))
	}
	if d.Status == "rejected" && len(d.Violations) == 0 {
		return d, badShape("approval decision is rejected without a violation")
	}
	return d, nil
}

// violations reads an approval decision's violations; absent is none.
func violations(raw any) ([]Violation, error) {
	out := []Violation{}
	if raw == nil {
		return out, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, badShape("approval decision violations is %s, want an array", kind(raw))
	}
	for i, x := range list {
		vm, ok := x.(map[string]any)
		if !ok {
			return nil, badShape("approval decision violations[%d] is %s, want an object", i, kind(x))
		}
		f := fields{m: vm}
		out = append(out, Violation{Rule: f.req("rule"), Description: f.str("description"), Suggestion: f.str("suggestion")})
		if f.err != nil {
			return nil, f.err
		}
	}
	return out, nil
}

func approvalSummary(d ApprovalDecision) summary {
	rules := make([]string, len(d.Violations))
	for i, v := range d.Violations {
		rules[i] = v.Rule
	}
	text := d.Status
	if len(rules) > 0 {
		text += " [" + strings.Join(rules, ", ") + "]"
	}
	return summary{key: d.Status, text: text, failClosed: d.FailClosed, cause: d.Error}
}

// chatFrom decodes a deny set; name is the policy ("chat", "messages").
func chatFrom(out outcome, name string) ChatDecision {
	d := decodeOr(out, func(v any) (ChatDecision, error) {
		reasons, err := stringList(v, name+".deny")
		sort.Strings(reasons)
		return ChatDecision{Deny: len(reasons) > 0, Reasons: reasons}, err
	}, func(rule, msg string) ChatDecision {
		return ChatDecision{
			Deny:       true,
			Reasons:    []string{"the " + name + " policy could not decide (fail closed): " + msg},
			FailClosed: true,
			Error:      rule + ": " + msg,
		}
	})
	d.DecisionID, d.Revision = out.id, out.revision
	return d
}

// messagesFrom decodes the messages policy's deny set.
func messagesFrom(out outcome) ChatDecision { return chatFrom(out, "messages") }

func chatDenyFrom(out outcome) ChatDecision { return chatFrom(out, "chat") }

func chatSummary(d ChatDecision) summary {
	if !d.Deny {
		return summary{key: "allow", text: "allow"}
	}
	return summary{key: "deny", text: "deny [" + strings.Join(d.Reasons, "; ") + "]", failClosed: d.FailClosed, cause: d.Error}
}

var sacpStatuses = map[string]bool{"success": true, "failure": true, "clarification_needed": true, "completed": true,
	"retry_with_instruction": true, "WAITING_FOR_HUMAN": true}

func guardrailsFrom(out outcome) GuardrailDecision {
	d := decodeOr(out, decodeGuardrails, func(rule, msg string) GuardrailDecision {
		return GuardrailDecision{
			Status:        "failure",
			RedactMessage: true,
			Reason:        "the guardrails policy could not decide (fail closed): " + msg,
			FailClosed:    true,
			Error:         rule + ": " + msg,
		}
	})
	d.DecisionID, d.Revision = out.id, out.revision
	return d
}

func decodeGuardrails(v any) (GuardrailDecision, error) {
	f := object(v, "guardrails response")
	d := GuardrailDecision{Status: f.oneOf("status", sacpStatuses, "guardrails response status", "success, failure, clarification_needed, completed, retry_with_instruction or WAITING_FOR_HUMAN")}
	if raw, ok := f.get("redact_message"); ok {
		b, ok := raw.(bool)
		if !ok {
			return d, badShape("guardrails response redact_message is %s, want a boolean", kind(raw))
		}
		d.RedactMessage = b
	}
	d.Reason = f.str("reason")
	return d, f.err
}

func guardrailsSummary(d GuardrailDecision) summary {
	key := d.Status
	if d.RedactMessage {
		key += "+redact"
	}
	text := key
	if d.Reason != "" {
		text += " [" + d.Reason + "]"
	}
	return summary{key: key, text: text, failClosed: d.FailClosed, cause: d.Error}
}

var spawnStatuses = map[string]bool{"approved": true, "rejected": true, "escalated": true}

func spawnFrom(out outcome) SpawnDecision {
	d := decodeOr(out, decodeSpawn, func(rule, msg string) SpawnDecision {
		return SpawnDecision{
			Status:     "rejected",
			Reasons:    []string{"the spawn policy could not decide (fail closed): " + msg},
			FailClosed: true,
			Error:      rule + ": " + msg,
		}
	})
	d.DecisionID, d.Revision = out.id, out.revision
	return d
}

func decodeSpawn(v any) (SpawnDecision, error) {
	f := object(v, "spawn decision")
	d := SpawnDecision{Status: f.oneOf("status", spawnStatuses, "spawn decision status", "approved, rejected or escalated"), Reasons: f.strs("reasons")}
	return d, f.err
}

func workflowFrom(out outcome) WorkflowDecision {
	d := decodeOr(out, func(v any) (WorkflowDecision, error) {
		allow, ok := v.(bool)
		if !ok {
			return WorkflowDecision{}, badShape("workflow decision is %s, want a boolean", kind(v))
		}
		return WorkflowDecision{Allow: allow}, nil
	}, func(rule, msg string) WorkflowDecision {
		return WorkflowDecision{Reason: "the workflow policy could not decide (fail closed): " + msg, FailClosed: true, Error: rule + ": " + msg}
	})
	d.DecisionID, d.Revision = out.id, out.revision
	return d
}

func workflowSummary(d WorkflowDecision) summary {
	if d.Allow {
		return summary{key: "allow", text: "allow"}
	}
	return summary{key: "deny", text: "deny", failClosed: d.FailClosed, cause: d.Error}
}

func spawnSummary(d SpawnDecision) summary {
	text := d.Status
	if len(d.Reasons) > 0 {
		text += " [" + strings.Join(d.Reasons, "; ") + "]"
	}
	return summary{key: d.Status, text: text, failClosed: d.FailClosed, cause: d.Error}
}

// summarize decodes a shadow outcome of pt into its summary.
func summarize(pt point, out outcome) summary {
	switch pt {
	case ptApproval:
		return approvalSummary(approvalFrom(out))
	case ptChat:
		return chatSummary(chatFrom(out, "chat"))
	case ptMessages:
		return chatSummary(messagesFrom(out))
	case ptGuardrails:
		return guardrailsSummary(guardrailsFrom(out))
	case ptWorkflow, ptSignedURL, ptMCPClients:
		return workflowSummary(workflowFrom(out))
	case ptMCP:
		return mcpSummary(mcpFrom(out))
	default:
		return spawnSummary(spawnFrom(out))
	}
}

// stringList reads an array (a Rego set arrives as an array, sorted) of strings.
func stringList(v any, what string) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, badShape("%s is %s, want an array or set of strings", what, kind(v))
	}
	out := make([]string, len(list))
	for i, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, badShape("%s[%d] is %s, want a string", what, i, kind(x))
		}
		out[i] = s
	}
	return out, nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64, int:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
