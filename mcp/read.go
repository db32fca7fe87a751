package mcp

import (
	"context"
	"net/http"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/policy"
)

// readParams are the params of the methods that list or read (resources,
// prompts, tools/list, ping), read strictly: which members each method
// takes is checked by paramsFit.
type readParams struct {
	Cursor    *string        `json:"cursor,omitzero"`
	URI       string         `json:"uri,omitzero"`
	Name      string         `json:"name,omitzero"`
	Arguments jsontext.Value `json:"arguments,omitzero"`
	Meta      jsontext.Value `json:"_meta,omitzero"`
}

// The members each read method takes besides _meta.
const (
	takesNothing = iota
	takesCursor
	takesURI
	takesPrompt
)

var readMethods = map[string]int{
	"ping":           takesNothing,
	"tools/list":     takesCursor,
	"resources/list": takesCursor, "resources/templates/list": takesCursor, "prompts/list": takesCursor,
	"resources/read": takesURI, "resources/subscribe": takesURI, "resources/unsubscribe": takesURI,
	"prompts/get": takesPrompt,
}

// subject is what a read names: a resource's URI or a prompt's name (""
// for a listing).
func (p readParams) subject() string {
	if p.URI != "" {
		return p.URI
	}
	return p.Name
}

// readParamsOf reads m's params for its method; ok false: they do not fit.
func readParamsOf(m *message) (readParams, bool) {
	var p readParams
	if m.params != nil && json.Unmarshal(m.params, &p, strict) != nil {
		return p, false
	}
	if p.Meta != nil && p.Meta.Kind() != '{' {
		return p, false
	}
	switch readMethods[m.method] {
	case takesNothing:
		return p, p.Cursor == nil && p.URI == "" && p.Name == "" && p.Arguments == nil
	case takesCursor:
		return p, p.URI == "" && p.Name == "" && p.Arguments == nil
	case takesURI:
		return p, p.URI != "" && p.Cursor == nil && p.Name == "" && p.Arguments == nil
	default:
		return p, p.Name != "" && p.URI == "" && p.Cursor == nil && (p.Arguments == nil || p.Arguments.Kind() == '{')
	}
}

// read governs the resource and prompt methods: the policy decides with
// the method and what it reads (the default allows them); a read of one
// resource or prompt is written to the audit trail with its result, a
// listing only when refused. An escalation cannot be approved here (the
// approvals bind tool calls): it is a denial.
//
// body is the request as admit passed it (redacted); the policy decides
// on what the agent sent, the audit records the redacted name.
func (t *turn) read(ctx context.Context, m *message, a *answer, p readParams, body []byte) {
	subject := map[string]any{}
	name, label := "", "_resources"
	var args jsontext.Value
	switch readMethods[m.method] {
	case takesURI:
		name = p.URI
		subject["resource"] = map[string]any{"uri": p.URI}
	case takesPrompt:
		name, label, args = p.Name, "_prompts", p.Arguments
		subject["prompt"] = map[string]any{"name": p.Name}
	default:
		if m.method == "prompts/list" {
			label = "_prompts"
		}
	}
	if args == nil {
		args = jsontext.Value("{}")
	}
	dec := t.decide(ctx, m.method, subject, args, true)
	rec := t.newRecord(m, m.method, t.redactName(name))
	decision, reason := dec.Decision, dec.Reason
	if decision == policy.MCPEscalate {
		decision, reason = policy.MCPDeny, reason+" (a person's approval binds tool calls only)"
	}
	rec.decision(dec, decision, reason)
	if decision != policy.MCPAllow {
		t.refuse(ctx, m, a, rec, label, "deny", codeDenied, "Denied by policy: "+reason, nil)
		return
	}
	if name == "" || m.method == "resources/subscribe" || m.method == "resources/unsubscribe" {
		t.relay(ctx, m, body, a, t.plain)
		return
	}
	if err := t.write(ctx, KindCall, rec.sum, m.raw); err != nil {
		a.fail(m.id, codeUnavailable, "The audit trail is unavailable: the request was not sent.", nil)
		return
	}
	t.d.metrics.call(t.srv.name, label, "allow")
	t.forward(ctx, m, a, label, body)
}

// listTools passes on the server's tools/list with only the tools the
// agent may use: named by its mcp_tools and not denied by the policy
// (an escalated tool is listed: a person may approve its calls).
func (t *turn) listTools(ctx context.Context, m *message, a *answer, body []byte) {
	t.relay(ctx, m, body, a, func(resp *http.Response, um *message) []byte {
		if um.result == nil {
			return t.plain(resp, um)
		}
		result, err := t.filterTools(ctx, um.result)
		if err != nil {
			t.d.log.Warn("mcp: tool list refused", "server", t.srv.name, "error", err.Error())
			return errorResponse(um.id, codeUpstream, "MCP server "+quote(t.srv.name)+" sent a tool list the gateway cannot read.", nil)
		}
		return t.plain(resp, &message{id: um.id, result: result})
	})
}

// filterTools keeps the tools the agent may use; the result's other
// members stay as the server sent them.
func (t *turn) filterTools(ctx context.Context, result jsontext.Value) (jsontext.Value, error) {
	var members map[string]jsontext.Value
	if err := json.Unmarshal(result, &members); err != nil {
		return nil, err
	}
	var tools []jsontext.Value
	if err := json.Unmarshal(members["tools"], &tools); err != nil {
		return nil, err
	}
	kept := make([]jsontext.Value, 0, len(tools))
	for _, raw := range tools {
		ti, err := readTool(raw)
		if err != nil {
			return nil, err
		}
		if !t.allowedTool(ti.Name) {
			continue
		}
		if ok, _ := t.servable(ctx, ti); !ok {
			continue
		}
		in, err := toolInput(ti)
		if err != nil {
			continue // fail closed: a tool the policy cannot see is not shown
		}
		if t.decide(ctx, "tools/list", map[string]any{"tool": in}, jsontext.Value("{}"), true).Decision == policy.MCPDeny {
			continue
		}
		kept = append(kept, raw)
	}
	list, err := json.Marshal(kept)
	if err != nil {
		return nil, err
	}
	members["tools"] = list
	return json.Marshal(members, json.Deterministic(true))
}
