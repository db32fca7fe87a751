package approval

import (
	"time"

	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/policy"
)

// input builds the policy's input document (docs/approval.md, "What the
// policy receives"):
//
//	{request, agent, protocol, authz: {allowed, reason}, known_references,
//	 target, content_check, references}
//
// agent, protocol and authz come from the policy package's helpers, so the
// names the default Rego reads are defined in one place (sizes in bytes,
// timeouts in milliseconds, no token hash). request is built here: every
// field of the AgentRequest is present (empty when the agent sent none), so
// rules can test for emptiness without tripping over undefined values.
// target, content_check and references are the facts the gateway looked up
// (facts.go), each always present with every key.
func (s *Service) input(agent *roster.Agent, req *AgentRequest, az Authz, f facts) map[string]any {
	in := map[string]any{
		"request":          requestInput(req),
		"agent":            policy.AgentInput(agent),
		"protocol":         s.cur().protocolIn,
		"authz":            policy.AuthzInput(az),
		"known_references": s.cur().knownRefs,
	}
	for k, v := range f.input() {
		in[k] = v
	}
	return in
}

// requestInput is the AgentRequest under its JSON names, plus
// content_bytes (Rego's count() counts code points, the limit is in bytes)
// and content_sha256.
func requestInput(r *AgentRequest) map[string]any {
	ts := ""
	if r.Timestamp != nil {
		ts = r.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	deviations := make([]any, 0, len(r.Deviations))
	for _, d := range r.Deviations {
		m := make(map[string]any, len(d))
		for k, v := range d {
			m[k] = v
		}
		deviations = append(deviations, m)
	}
	var completed any
	if r.Completed != nil {
		completed = *r.Completed
	}
	var changes any
	if c := r.ChangesMade; c != nil {
		changes = map[string]any{"summary": c.Summary, "files": strs(c.Files), "content_sha256": c.ContentSHA256}
	}
	return map[string]any{
		"agent_id":        r.AgentID,
		"session_id":      r.SessionID,
		"timestamp":       ts,
		"request_type":    r.RequestType,
		"action":          r.Action,
		"target_type":     r.TargetType,
		"target_path":     r.TargetPath,
		"target_id":       r.TargetID,
		"content":         r.Content,
		"content_bytes":   len(r.Content),
		"content_sha256":  sha256Hex([]byte(r.Content)),
		"rationale":       r.Rationale,
		"references":      strs(r.References),
		"context_used":    strs(r.ContextUsed),
		"deviations":      deviations,
		"risk_assessment": r.RiskAssessment,
		"request_id":      r.RequestID,
		"completed":       completed,
		"changes_made":    changes,
	}
}

func strs(v []string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}
