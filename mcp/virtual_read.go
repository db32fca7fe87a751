package mcp

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/policy"
)

// A virtual server's resources and prompts. A listing is served one
// member at a time, in the members' order: each page is one page of one
// member's own listing, its items behind the member's prefix (a resource's
// URI or template, a prompt's name), and its nextCursor the gateway's,
// naming the member and that member's cursor, signed with the session's
// key: a cursor the gateway did not issue in this session is refused, so
// no cursor can be made to reach another server or carry a string of the
// agent's to a server. A read (resources/read, prompts/get) goes, by its
// prefix, to its member with the URI or name that server knows, and is
// governed there exactly as a read through /mcp/{server}: the agent's
// mcp_tools entry for the server, the policy's input naming it, limits,
// redaction both ways and the audit trail. Only the servers the agent's
// mcp_tools name are listed or read; a listing the policy refuses for a
// server skips that server (and is audited as refused).

// virtualLists are the listings a virtual server combines: the member of
// the result holding the items, and the member of an item the prefix goes
// before.
var virtualLists = map[string]struct{ items, key string }{
	"resources/list":           {"resources", "uri"},
	"resources/templates/list": {"resourceTemplates", "uriTemplate"},
	"prompts/list":             {"prompts", "name"},
}

// errCursor: a cursor this session did not issue.
var errCursor = errors.New("not a cursor of this session")

// mayList reports whether the agent's mcp_tools have an entry for the
// member's server: what /mcp/{server} asks before anything.
func (t *turn) mayList(mb member) bool {
	_, ok := t.agent.MCPTools[mb.srv.name]
	return ok
}

// virtualList answers one page of a combined listing.
func (t *turn) virtualList(ctx context.Context, m *message, a *answer) {
	p, ok := readParamsOf(m)
	if !ok {
		a.fail(m.id, codeInvalidParams, "The params of "+m.method+" are not of the shape the gateway knows.", nil)
		return
	}
	body, ok := t.admit(ctx, m, a, "")
	if !ok {
		return
	}
	start, cursor := 0, ""
	if p.Cursor != nil {
		var err error
		if start, cursor, err = t.readCursor(m.method, *p.Cursor); err != nil {
			a.fail(m.id, codeInvalidParams, "The cursor of "+m.method+" was not issued by this gateway in this session: list again without one.", nil)
			return
		}
	}
	for i := start; i < len(t.srv.members); i, cursor = i+1, "" {
		mb := t.srv.members[i]
		if !t.mayList(mb) {
			continue
		}
		mt := t.memberTurn(mb)
		if !mt.listAllowed(ctx, m) {
			continue
		}
		mt.listPage(ctx, m, a, body, cursor, mb.prefix, func(next string) string { return t.nextCursor(m.method, i, next) })
		return
	}
	page, _ := json.Marshal(map[string]any{virtualLists[m.method].items: []any{}})
	a.respond(response(m.id, page))
}

// listAllowed asks the policy whether the agent may list this server's
// resources or prompts; a refusal is audited, as through /mcp/{server}.
func (t *turn) listAllowed(ctx context.Context, m *message) bool {
	dec := t.decide(ctx, m.method, map[string]any{}, jsontext.Value("{}"), true)
	if dec.Decision == policy.MCPAllow {
		return true
	}
	rec := t.newRecord(m, m.method, "")
	rec.decision(dec, policy.MCPDeny, dec.Reason)
	t.d.metrics.call(t.srv.name, methodLabel(m.method), "deny")
	if err := t.write(ctx, KindCall, rec.sum, m.raw); err != nil {
		t.d.log.Warn("mcp: audit", "server", t.srv.name, "error", err.Error())
	}
	return false
}

// listPage asks the member server for the page at its cursor (body is the
// agent's request as admit redacted it) and answers it with the items
// behind prefix and next's cursor. A server that does not list what is
// asked gives an empty page.
func (t *turn) listPage(ctx context.Context, m *message, a *answer, body []byte, cursor, prefix string, next func(string) string) {
	sent, err := readMessage(body)
	var params jsontext.Value
	if err == nil {
		params, err = withMember(sent.params, "cursor", cursor)
	}
	if err != nil {
		a.fail(m.id, codeInvalidParams, "The params of "+m.method+" are not of the shape the gateway knows.", nil)
		return
	}
	t.relay(ctx, m, request(m.id, m.method, params), a, func(resp *http.Response, um *message) []byte {
		if um.errObj != nil && um.errObj.Code == codeMethodNotFound {
			um = &message{id: um.id, result: jsontext.Value(`{"` + virtualLists[m.method].items + `":[]}`)}
		}
		out, err := readMessage(t.plain(resp, um))
		if err != nil || out.result == nil {
			return t.plain(resp, um)
		}
		page, err := prefixedPage(out.result, virtualLists[m.method].items, virtualLists[m.method].key, prefix, next)
		if err != nil {
			t.d.log.Warn("mcp: listing refused", "server", t.srv.name, "method", m.method, "error", err.Error())
			return errorResponse(um.id, codeUpstream, "MCP server "+quote(t.srv.name)+" sent a "+m.method+" result the gateway cannot read.", nil)
		}
		return response(um.id, page)
	})
}

// prefixedPage is a listing's result with each item's key behind prefix
// and nextCursor replaced by next's cursor (dropped when it gives none).
// An item without a string key, or items that are not a list of objects,
// fail it.
func prefixedPage(result jsontext.Value, items, key, prefix string, next func(string) string) (jsontext.Value, error) {
	var page map[string]jsontext.Value
	if err := json.Unmarshal(result, &page); err != nil {
		return nil, err
	}
	var list []map[string]jsontext.Value
	if err := json.Unmarshal(page[items], &list); err != nil {
		return nil, errors.New(items + ": not a list of objects")
	}
	for _, it := range list {
		var s string
		if err := json.Unmarshal(it[key], &s); err != nil || s == "" {
			return nil, errors.New(items + ": an item without " + key)
		}
		it[key], _ = json.Marshal(prefix + s)
	}
	var cursor string
	if raw, ok := page["nextCursor"]; ok {
		if err := json.Unmarshal(raw, &cursor); err != nil {
			return nil, errors.New("nextCursor: not a string")
		}
	}
	delete(page, "nextCursor")
	if c := next(cursor); c != "" {
		page["nextCursor"], _ = json.Marshal(c)
	}
	var err error
	if page[items], err = json.Marshal(list, json.Deterministic(true)); err != nil {
		return nil, err
	}
	return json.Marshal(page, json.Deterministic(true))
}

// nextCursor is the cursor of the page after one of member i whose own
// next cursor is next: the rest of that member, else the first of the
// next members the agent may list, else none.
func (t *turn) nextCursor(method string, i int, next string) string {
	if next != "" {
		return t.issueCursor(method, i, next)
	}
	for j := i + 1; j < len(t.srv.members); j++ {
		if t.mayList(t.srv.members[j]) {
			return t.issueCursor(method, j, "")
		}
	}
	return ""
}

// issueCursor is the gateway's cursor for member i's page at its cursor:
// the member's name and cursor, and their MAC under the session's key
// (bound to the method too). A session without a key issues none.
func (t *turn) issueCursor(method string, i int, cursor string) string {
	if t.sess.CursorKey == "" {
		return ""
	}
	payload := t.srv.members[i].srv.name + "\x00" + cursor
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString(t.cursorMAC(method, payload))
}

// readCursor checks a cursor the agent sent back: issued in this session
// for this method, naming a member the agent may still list. It returns
// the member's index and its cursor.
func (t *turn) readCursor(method, c string) (int, string, error) {
	// Strict: one cursor has one spelling.
	enc := base64.RawURLEncoding.Strict()
	p, m, ok := strings.Cut(c, ".")
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(m)
	if !ok || err1 != nil || err2 != nil || t.sess.CursorKey == "" || !hmac.Equal(mac, t.cursorMAC(method, string(payload))) {
		return 0, "", errCursor
	}
	name, cursor, _ := strings.Cut(string(payload), "\x00")
	for i, mb := range t.srv.members {
		if mb.srv.name == name && t.mayList(mb) {
			return i, cursor, nil
		}
	}
	return 0, "", errCursor
}

func (t *turn) cursorMAC(method, payload string) []byte {
	h := hmac.New(sha256.New, []byte(t.sess.CursorKey))
	h.Write([]byte(method + "\x00" + payload))
	return h.Sum(nil)
}

// routeRead sends a resources/read or prompts/get to the member its URI's
// or name's prefix names, with the URI or name its server knows: from
// there on it is that server's read.
func (t *turn) routeRead(ctx context.Context, m *message, a *answer) {
	p, ok := readParamsOf(m)
	if !ok {
		a.fail(m.id, codeInvalidParams, "The params of "+m.method+" are not of the shape the gateway knows.", nil)
		return
	}
	key, what, subject := "uri", "resource", p.URI
	if m.method == "prompts/get" {
		key, what, subject = "name", "prompt", p.Name
	}
	for _, mb := range t.srv.members {
		rest, ok := strings.CutPrefix(subject, mb.prefix)
		if !ok || rest == "" {
			continue
		}
		if !t.mayList(mb) {
			a.fail(m.id, codeDenied, "Agent "+quote(t.agent.ID)+" may not use MCP server "+quote(mb.srv.name)+" (it has no mcp_tools entry for it).", nil)
			return
		}
		if um, err := rerouted(m, key, rest); err == nil {
			t.memberTurn(mb).serve(ctx, um, a)
			return
		}
		break
	}
	a.fail(m.id, codeInvalidParams, "MCP server "+quote(t.srv.name)+" has no "+what+" "+quote(subject)+
		": each of its "+what+"s begins with the prefix of one of its servers.", nil)
}

// rerouted is m with its params' key set to value (the name or URI the
// member server knows), read as the gateway reads any message.
func rerouted(m *message, key, value string) (*message, error) {
	params, err := withMember(m.params, key, value)
	if err != nil {
		return nil, err
	}
	return readMessage(request(m.id, m.method, params))
}

// withMember is the params object with key set to value ("" removes it).
func withMember(params jsontext.Value, key, value string) (jsontext.Value, error) {
	p := map[string]jsontext.Value{}
	if params != nil {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, err
		}
	}
	delete(p, key)
	if value != "" {
		v, err := json.Marshal(value)
		if err != nil {
			return nil, err
		}
		p[key] = v
	}
	return json.Marshal(p, json.Deterministic(true))
}
