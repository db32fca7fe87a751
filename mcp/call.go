package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"path"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/policy"
)

// Audit kinds of the door.
const (
	// KindCall is an agent's tools/call (or resources/read, prompts/get):
	// what was asked, the decision, and why.
	KindCall = "mcp.call"
	// KindResult is the answer to a call that went to its server.
	KindResult = "mcp.result"
)

// callParams are tools/call's params as the gateway reads them: the tool,
// its arguments, and the request's _meta (a progress token), passed on as
// is. Anything else is refused: a task (run in the background, its result
// fetched later by another method) would take the result past the
// gateway.
type callParams struct {
	Name      string         `json:"name"`
	Arguments jsontext.Value `json:"arguments,omitzero"`
	Meta      jsontext.Value `json:"_meta,omitzero"`
}

// callTool governs one tools/call, in this order: limits (before anything
// costs the server), the tool as its server lists it, the policy (and the
// agent's mcp_tools: both must allow), the redaction of the arguments, a
// person's approval when the policy escalates, the mcp.call entry (durable
// before the tool runs when audit.fail_mode is closed), the call, the
// redaction of the result and the mcp.result entry.
func (t *turn) callTool(ctx context.Context, m *message, a *answer) {
	var p callParams
	if m.params == nil || json.Unmarshal(m.params, &p, strict) != nil || p.Name == "" || len(p.Name) > 256 ||
		(p.Arguments != nil && p.Arguments.Kind() != '{' && p.Arguments.Kind() != 'n') || (p.Meta != nil && p.Meta.Kind() != '{') {
		a.fail(m.id, codeInvalidParams, "tools/call takes {name, arguments (an object), _meta}.", nil)
		return
	}
	if p.Arguments == nil || p.Arguments.Kind() == 'n' {
		p.Arguments = jsontext.Value("{}")
	}
	rec := t.newRecord(m, "tools/call", p.Name)
	label := t.toolLabel(p.Name)
	if code, msg, data := t.spend(ctx, p.Name); code != 0 {
		rec.set("decision", "limited")
		t.refuse(ctx, m, a, rec, label, "limit", code, msg, data)
		return
	}
	info, err := t.srv.catalog.lookup(ctx, p.Name, func(ctx context.Context) (map[string]toolInfo, error) { return t.d.readTools(ctx, t.srv) })
	switch {
	case errors.Is(err, errUnknownTool):
		rec.set("decision", "deny")
		rec.set("reason", "unknown tool")
		t.refuse(ctx, m, a, rec, label, "deny", codeInvalidParams, "MCP server "+quote(t.srv.name)+" lists no tool "+quote(p.Name)+".", nil)
		return
	case err != nil:
		t.d.log.Warn("mcp: tool list unreadable", "server", t.srv.name, "error", err.Error())
		rec.set("decision", "deny")
		rec.set("reason", "tool list unreadable")
		t.refuse(ctx, m, a, rec, label, "error", codeUpstream, failure(err, "The tool list of MCP server "+quote(t.srv.name)+" could not be read; the call is refused until it can."), nil)
		return
	}
	if ok, why := t.servable(ctx, info); !ok {
		rec.set("decision", "deny")
		rec.set("reason", "tool withheld")
		t.refuse(ctx, m, a, rec, label, "deny", codeDenied, "Tool "+quote(p.Name)+" is withheld: "+why+".", nil)
		return
	}
	out, err := t.outgoingCall(p)
	if err != nil {
		t.refuseUnchanged(ctx, m, a, rec, label, err)
		return
	}
	rec.set("arguments_sha256", out.argsSHA256)
	if out.metaSHA256 != "" {
		rec.set("meta_sha256", out.metaSHA256)
	}
	allowed := t.allowedTool(p.Name)
	tool, err := toolInput(info)
	if err != nil {
		rec.set("decision", "deny")
		rec.set("reason", "annotations unreadable")
		t.refuse(ctx, m, a, rec, label, "deny", codeDenied, "Denied: the server's annotations of the tool cannot be read.", nil)
		return
	}
	dec := t.decide(ctx, "tools/call", map[string]any{"tool": tool}, p.Arguments, allowed)
	decision, reason := dec.Decision, dec.Reason
	if !allowed && decision != policy.MCPDeny {
		// Both must allow: a policy cannot open a tool mcp_tools keeps shut.
		decision, reason = policy.MCPDeny, "tool "+quote(p.Name)+" is not in the agent's mcp_tools for this server"
	}
	rec.decision(dec, decision, reason)
	rec.redactions("argument_redactions", out.res.Counts)
	if out.res.Blocked != "" {
		rec.set("decision", "blocked")
		rec.set("blocked", out.res.Blocked)
		t.refuse(ctx, m, a, rec, label, "block", codeBlocked, "The call was refused: its arguments contain data that may not leave ("+out.res.Blocked+").",
			map[string]any{"detector": out.res.Blocked})
		return
	}
	switch decision {
	case policy.MCPDeny:
		t.refuse(ctx, m, a, rec, label, "deny", codeDenied, "Denied by policy: "+reason, nil)
		return
	case policy.MCPEscalate:
		granted, ok := t.approval(ctx, m, a, rec, label, info, out, dec, reason, p)
		if !ok {
			return
		}
		// The policy still escalates; a person approved this very call.
		rec.set("decision", "approved")
		rec.set("escalation_id", granted)
	}
	if err := t.write(ctx, KindCall, rec.sum, m.raw); err != nil {
		a.fail(m.id, codeUnavailable, "The audit trail is unavailable: the call was not made.", nil)
		return
	}
	t.d.metrics.call(t.srv.name, label, str(rec.sum["decision"]))
	t.forward(ctx, m, a, label, callBody(m.id, p.Name, out))
}

// forward makes the call and writes its mcp.result, whatever the answer
// (an error, none at all).
func (t *turn) forward(ctx context.Context, m *message, a *answer, label string, body []byte) {
	start := time.Now()
	answered := false
	t.relay(ctx, m, body, a, func(resp *http.Response, um *message) []byte {
		answered = true
		out, res, err := t.redactMessage(um)
		sum := t.resultSummary(m, um, start)
		switch {
		case err != nil:
			out = errorResponse(m.id, codeUpstream, "MCP server "+quote(t.srv.name)+" answered something the gateway cannot scan.", nil)
			sum["error"] = "unscannable"
		case res.Blocked != "":
			out = blockedAnswer(m.id, res.Blocked)
			sum["blocked"] = res.Blocked
		}
		if len(res.Counts) > 0 {
			sum["redactions"] = res.Counts
		}
		if err := t.write(ctx, KindResult, sum, out); err != nil {
			return errorResponse(m.id, codeUnavailable, "The audit trail is unavailable: the result is withheld.", nil)
		}
		return out
	})
	t.d.metrics.latency(t.srv.name, label, time.Since(start))
	if !answered {
		sum := t.resultSummary(m, nil, start)
		sum["error"] = "no answer"
		t.d.metrics.call(t.srv.name, label, "error")
		_ = t.write(ctx, KindResult, sum, nil)
	}
}

// callBody is the tools/call the server gets: exactly the canonical
// arguments and _meta that were hashed (and, when escalated, shown to a
// person).
func callBody(id jsontext.Value, name string, out outCall) []byte {
	b := []byte(`{"name":`)
	b, _ = jsontext.AppendQuote(b, name)
	b = append(b, `,"arguments":`...)
	b = append(b, out.args...)
	if out.meta != nil {
		b = append(b, `,"_meta":`...)
		b = append(b, out.meta...)
	}
	return request(id, "tools/call", append(b, '}'))
}

// escalate opens a person's review of the call and answers the agent with
// where it waits.
func (t *turn) escalate(ctx context.Context, m *message, a *answer, rec *record, label string, info toolInfo, out outCall, dec policy.MCPDecision, reason string) {
	if t.d.opener == nil {
		t.refuse(ctx, m, a, rec, label, "deny", codeDenied, "Denied: the policy asks for a person's approval, and this gateway has no approval service.", nil)
		return
	}
	opened, ok := t.openReview(ctx, m, a, rec, label, info, out, dec, reason, time.Time{})
	if !ok {
		return
	}
	data := map[string]any{"escalation_id": opened.ID, "human_review_url": opened.ReviewURL}
	t.refuse(ctx, m, a, rec, label, "escalate", codeEscalated,
		"A person must approve this call ("+reason+"). Once approved, send the same call again.", data)
}

// approval finds a person's approval of the escalated call: one given
// before, or, when the call is held, one given while it waits. Without
// one it answers the agent (the review opened) and reports false.
func (t *turn) approval(ctx context.Context, m *message, a *answer, rec *record, label string, info toolInfo, out outCall,
	dec policy.MCPDecision, reason string, p callParams) (string, bool) {
	granted, ok, err := t.d.grants.Take(ctx, grantKey(t.agent.ID, t.srv.name, p.Name, out.argsSHA256, out.metaSHA256))
	switch {
	case err != nil:
		t.d.log.Error("mcp: grants", "error", err.Error())
		t.refuse(ctx, m, a, rec, label, "error", codeUnavailable, "The gateway's approvals are unavailable; retry shortly.", nil)
		return "", false
	case ok:
		return granted, true
	}
	if wait := t.srv.holdFor(p.Name); wait > 0 && t.d.opener != nil {
		return t.hold(ctx, m, a, rec, label, info, out, dec, reason, wait, p.Meta)
	}
	t.escalate(ctx, m, a, rec, label, info, out, dec, reason)
	return "", false
}

// openReview opens a person's review of the call, exactly as the server
// will receive it (and, when the call is held, until when the agent
// waits); it answers the refusal itself when it cannot.
func (t *turn) openReview(ctx context.Context, m *message, a *answer, rec *record, label string, info toolInfo, out outCall,
	dec policy.MCPDecision, reason string, heldUntil time.Time) (escalation.Opened, bool) {
	desc := info.Description
	if t.c.red != nil {
		desc, _ = t.c.red.String(desc)
	}
	content, err := review{Method: "tools/call", Server: t.srv.name, Tool: info.Name, Description: desc, Annotations: info.Annotations,
		Arguments: out.args, ArgumentsSHA256: out.argsSHA256, Meta: out.meta, Via: t.via, Held: t.heldReview(ctx, heldUntil)}.content()
	var opened escalation.Opened
	if err == nil {
		opened, err = t.d.opener.Open(ctx, escalation.Request{Type: escalation.TypeMCP, AgentID: t.agent.ID, SessionID: t.ex.SessionID,
			Action: "call MCP tool " + t.srv.name + "/" + info.Name, Content: content, Reason: reason,
			DecisionID: dec.DecisionID, Revision: dec.Revision})
	}
	if err != nil {
		t.d.log.Error("mcp: escalation not opened", "server", t.srv.name, "tool", info.Name, "error", err.Error())
		t.refuse(ctx, m, a, rec, label, "error", codeUnavailable, "The call needs a person's approval, and the review could not be opened; retry shortly.", nil)
		return escalation.Opened{}, false
	}
	rec.set("escalation_id", opened.ID)
	return opened, true
}

// refuse writes the mcp.call entry of a call that does not go to its
// server and answers the agent's request with the error.
func (t *turn) refuse(ctx context.Context, m *message, a *answer, rec *record, label, outcome string, code int64, msg string, data any) {
	t.d.metrics.call(t.srv.name, label, outcome)
	if err := t.write(ctx, KindCall, rec.sum, m.raw); err != nil {
		a.fail(m.id, codeUnavailable, "The audit trail is unavailable.", nil)
		return
	}
	a.fail(m.id, code, msg, data)
}

// allowedTool reports whether the agent's mcp_tools globs for this server
// name the tool.
func (t *turn) allowedTool(name string) bool {
	for _, g := range t.agent.MCPTools[t.srv.name] {
		if ok, err := path.Match(g, name); err == nil && ok {
			return true
		}
	}
	return false
}

// decide asks data.gateway.mcp.decision. subject holds the method's own
// members (tool, resource or prompt); args is a checked JSON object.
func (t *turn) decide(ctx context.Context, method string, subject map[string]any, args jsontext.Value, allowed bool) policy.MCPDecision {
	agentIn, ok := t.c.agentIn[t.agent.ID]
	if !ok {
		agentIn = policy.AgentInput(t.agent) // an agent registered at run time
	}
	in := map[string]any{"agent": agentIn, "server": t.srv.name, "method": method,
		"authz": map[string]any{"allowed": allowed, "reason": authzReason(allowed)}}
	for k, v := range subject {
		in[k] = v
	}
	if args != nil {
		in["arguments"] = policy.RawJSON(args)
	}
	dec, err := t.d.policy.MCP(ctx, in)
	if err != nil {
		t.d.log.Warn("mcp: policy did not decide", "agent", t.agent.ID, "server", t.srv.name, "method", method, "error", err.Error())
	}
	return dec
}

func authzReason(allowed bool) string {
	if allowed {
		return ""
	}
	return "not in the agent's mcp_tools"
}

// toolInput is input.tool: the tool as its server describes it. An
// annotation OPA cannot read fails it (the caller denies): a decision must
// never miss a destructiveHint. The map is shared by every decision on the
// tool, and never written.
func toolInput(ti toolInfo) (map[string]any, error) {
	if ti.in != nil || ti.inErr != nil {
		return ti.in, ti.inErr
	}
	return convertTool(ti)
}

// convertTool makes input.tool from the tool's definition.
func convertTool(ti toolInfo) (map[string]any, error) {
	var ann any = map[string]any{}
	if ti.Annotations != nil {
		v, err := policy.JSONInput(ti.Annotations)
		if err != nil {
			return nil, err
		}
		ann = v
	}
	return map[string]any{"name": ti.Name, "description": ti.Description, "annotations": ann}, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
