package mcp

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/sourceguard"
)

// KindMessage is what an agent sends besides its requests: a notification
// (cancelled, progress, ...) or its answer to a server's request (a
// sampling result, an elicitation, roots). Each is audited, and as an
// agent can send them by the thousand, the trail's guard summarizes them
// (MessageFold).
const KindMessage = "mcp.message"

// MessageFold summarizes mcp.message entries per agent, server, session
// and outcome: the first of a window is written at once, the repeats as
// one counted entry, so a flood of notifications writes a bounded number
// of entries (the app puts it on the guard of failed authentications).
var MessageFold = sourceguard.Fold{
	Kind: KindMessage,
	Key: func(r audit.Record) string {
		return r.AgentID + "\x00" + r.Object.Text("server") + "\x00" + r.Object.Text("mcp_session_id") + "\x00" + r.Object.Text("outcome")
	},
	Keep: []string{"server", "mcp_session_id", "method", "outcome", "blocked"},
}

// refusal is a message the gateway did not pass on: the JSON-RPC error
// that says why.
type refusal struct {
	code int64
	msg  string
	data any
}

func (r *refusal) Error() string { return r.msg }

// status is the HTTP status of a POST refused for r (it held no request
// to answer with the error).
func (r *refusal) status() int {
	switch r.code {
	case codeRateLimited:
		return http.StatusTooManyRequests
	case codeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// refuseWith answers a POST refused for r, with Retry-After when it is a
// limit.
func refuseWith(w http.ResponseWriter, r *http.Request, rf *refusal) {
	if d, ok := rf.data.(map[string]any); ok && rf.code == codeRateLimited {
		if secs, ok := d["retry_after_seconds"].(int); ok {
			w.Header().Set("Retry-After", strconv.Itoa(secs))
		}
	}
	note(r, rf.status(), rf.code)
	httpx.WriteRawJSON(w, rf.status(), errorResponse(nil, rf.code, rf.msg, rf.data))
}

// tell governs a notification or an answer of the agent, then passes it
// on: one request of the agent's rate_limit, redacted (a blocked
// notification is refused; a blocked answer is replaced by an error, so
// the server does not wait for it), an mcp.message entry (summarized per
// session and window). A refusal is a *refusal.
func (t *turn) tell(ctx context.Context, m *message) error {
	method := m.method
	if m.isResponse() {
		method = "response"
	}
	sum := map[string]any{"server": t.srv.name, "mcp_session_id": t.sess.ID, "method": method}
	if code, msg, data := t.spend(ctx, ""); code != 0 {
		sum["outcome"] = "limited"
		_ = t.write(ctx, KindMessage, sum, m.raw)
		return &refusal{code, msg, data}
	}
	body, res, err := t.redactMessage(m)
	if err != nil {
		sum["outcome"] = "invalid"
		_ = t.write(ctx, KindMessage, sum, m.raw)
		return &refusal{codeInvalidParams, "The message cannot be scanned for redaction.", nil}
	}
	if len(res.Counts) > 0 {
		sum["redactions"] = res.Counts
	}
	if res.Blocked != "" {
		sum["outcome"], sum["blocked"] = "blocked", res.Blocked
		_ = t.write(ctx, KindMessage, sum, m.raw)
		if m.isResponse() {
			// The server waits for this answer: it gets an error in its
			// place, and the agent's POST is taken (a refused POST would
			// make its SDK end the session; the server's request, failed,
			// tells the agent's call what happened).
			withheld := errorResponse(m.id, codeBlocked, "The agent's answer was withheld by the gateway: it contains data that may not leave ("+res.Blocked+").",
				map[string]any{"detector": res.Blocked})
			return t.tellServer(ctx, withheld)
		}
		return &refusal{codeBlocked, "The message was refused: it contains data that may not leave (" + res.Blocked + ").", map[string]any{"detector": res.Blocked}}
	}
	sum["outcome"] = "passed"
	if err := t.write(ctx, KindMessage, sum, m.raw); err != nil {
		return &refusal{codeUnavailable, "The audit trail is unavailable: the message was not passed on.", nil}
	}
	return t.tellServer(ctx, body)
}

// admit governs a request the gateway passes on whole (all but tools/call,
// which does its own, and initialize): one request of the agent's
// rate_limit, then the message redacted (its cursor, URI, prompt
// arguments, _meta). A refusal is answered, and audited, here.
func (t *turn) admit(ctx context.Context, m *message, a *answer, name string) ([]byte, bool) {
	label := methodLabel(m.method)
	if code, msg, data := t.spend(ctx, ""); code != 0 {
		rec := t.newRecord(m, m.method, name)
		rec.set("decision", "limited")
		t.refuse(ctx, m, a, rec, label, "limit", code, msg, data)
		return nil, false
	}
	body, res, err := t.redactMessage(m)
	if err != nil {
		rec := t.newRecord(m, m.method, name)
		rec.set("decision", "invalid")
		rec.set("reason", "unscannable")
		t.refuse(ctx, m, a, rec, label, "invalid", codeInvalidParams, "The params of "+m.method+" cannot be scanned for redaction.", nil)
		return nil, false
	}
	if res.Blocked != "" {
		rec := t.newRecord(m, m.method, name)
		rec.set("decision", "blocked")
		rec.set("blocked", res.Blocked)
		rec.redactions("param_redactions", res.Counts)
		t.refuse(ctx, m, a, rec, label, "block", codeBlocked, "The request was refused: it contains data that may not leave ("+res.Blocked+").",
			map[string]any{"detector": res.Blocked})
		return nil, false
	}
	return body, true
}

// methodLabel is a method's metric label (the tool label of the calls).
func methodLabel(method string) string {
	switch {
	case strings.HasPrefix(method, "prompts/"):
		return "_prompts"
	case strings.HasPrefix(method, "resources/"):
		return "_resources"
	}
	return "_other"
}

// redactName is a name the audit records (a resource's URI, a prompt's
// name), redacted: the trail keeps no secret an agent put in one.
func (t *turn) redactName(s string) string {
	if t.c.red == nil {
		return s
	}
	out, _ := t.c.red.String(s)
	return out
}

// asRefusal tells whether err is a refusal, and which.
func asRefusal(err error) (*refusal, bool) {
	var rf *refusal
	ok := errors.As(err, &rf)
	return rf, ok
}
