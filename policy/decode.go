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

// object reads a decision value that must be an object; what names it.
func object(v any, what string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, badShape("%s is %s, want an object", what, kind(v))
	}
	return m, nil
}

// reqOneOf reads the required string m[key], which must be one of
// allowed; what names it and want lists allowed in the error.
func reqOneOf(m map[string]any, key string, allowed map[string]bool, what, want string) (string, error) {
	s, err := reqString(m, key)
	if err != nil {
		return "", err
	}
	if !allowed[s] {
		return "", badShape("%s %q is not %s", what, s, want)
	}
	return s, nil
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

func decodeApproval(v any) (d ApprovalDecision, err error) {
	m, err := object(v, "approval decision")
	if err != nil {
		return d, err
	}
	if d.Status, err = reqOneOf(m, "status", approvalStatuses, "approval decision status", "approved, rejected, escalated or clarification_needed"); err != nil {
		return d, err
	}
	if d.Confidence, err = optNumber(m, "confidence"); err != nil {
		return d, err
	}
	if d.Confidence < 0 || d.Confidence > 1 {
		return d, badShape("approval decision confidence %v is outside 0..1", d.Confidence)
	}
	if d.Feedback, err = optString(m, "feedback"); err != nil {
		return d, err
	}
	if d.ApprovedLocation, err = optString(m, "approved_location"); err != nil {
		return d, err
	}
	if d.EscalationReason, err = optString(m, "escalation_reason"); err != nil {
		return d, err
	}
	if d.Suggestions, err = optStrings(m, "suggestions"); err != nil {
		return d, err
	}
	if d.Constraints, err = optStrings(m, "constraints"); err != nil {
		return d, err
	}
	d.Violations = []Violation{}
	if raw, ok := m["violations"]; ok && raw != nil {
		list, ok := raw.([]any)
		if !ok {
			return d, badShape("approval decision violations is %s, want an array", kind(raw))
		}
		for i, x := range list {
			vm, ok := x.(map[string]any)
			if !ok {
				return d, badShape("approval decision violations[%d] is %s, want an object", i, kind(x))
			}
			var vi Violation
			if vi.Rule, err = reqString(vm, "rule"); err != nil {
				return d, err
			}
			if vi.Description, err = optString(vm, "description"); err != nil {
				return d, err
			}
			if vi.Suggestion, err = optString(vm, "suggestion"); err != nil {
				return d, err
			}
			d.Violations = append(d.Violations, vi)
		}
	}
	if d.Status == "approved" && len(d.Violations) > 0 {
		return d, badShape("approval decision is approved with %d violation(s)", len(d.Violations))
	}
	if d.Status == "rejected" && len(d.Violations) == 0 {
		return d, badShape("approval decision is rejected without a violation")
	}
	return d, nil
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

func decodeGuardrails(v any) (d GuardrailDecision, err error) {
	m, err := object(v, "guardrails response")
	if err != nil {
		return d, err
	}
	if d.Status, err = reqOneOf(m, "status", sacpStatuses, "guardrails response status", "success, failure, clarification_needed, completed, retry_with_instruction or WAITING_FOR_HUMAN"); err != nil {
		return d, err
	}
	if raw, ok := m["redact_message"]; ok && raw != nil {
		b, ok := raw.(bool)
		if !ok {
			return d, badShape("guardrails response redact_message is %s, want a boolean", kind(raw))
		}
		d.RedactMessage = b
	}
	d.Reason, err = optString(m, "reason")
	return d, err
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

func decodeSpawn(v any) (d SpawnDecision, err error) {
	m, err := object(v, "spawn decision")
	if err != nil {
		return d, err
	}
	if d.Status, err = reqOneOf(m, "status", spawnStatuses, "spawn decision status", "approved, rejected or escalated"); err != nil {
		return d, err
	}
	d.Reasons, err = optStrings(m, "reasons")
	return d, err
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

func reqString(m map[string]any, key string) (string, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return "", badShape("decision has no %q", key)
	}
	s, ok := raw.(string)
	if !ok {
		return "", badShape("decision %q is %s, want a string", key, kind(raw))
	}
	return s, nil
}

func optString(m map[string]any, key string) (string, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return "", nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", badShape("decision %q is %s, want a string", key, kind(raw))
	}
	return s, nil
}

func optNumber(m map[string]any, key string) (float64, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return 0, nil
	}
	switch n := raw.(type) {
	case json.Number:
		f, err := n.Float64()
		if err != nil {
			return 0, badShape("decision %q: %v", key, err)
		}
		return f, nil
	case float64:
		return n, nil
	case int:
		return float64(n), nil
	}
	return 0, badShape("decision %q is %s, want a number", key, kind(raw))
}

// optStrings reads an array (or set) of strings; absent is empty.
func optStrings(m map[string]any, key string) ([]string, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return []string{}, nil
	}
	return stringList(raw, key)
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
