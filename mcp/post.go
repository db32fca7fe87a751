package mcp

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
)

// post serves POST /mcp/{server}: one message or a batch. initialize opens
// a session and must come alone; anything else needs the agent's session.
// Notifications and responses (to the server's requests) are passed on and
// answered 202; requests are answered as JSON, or as a stream when the
// server streams its answer to a single request.
func (d *Door) post(w http.ResponseWriter, r *http.Request) {
	// The POST is an exchange of the audit trail from here on: while it is
	// in progress (its call at the server, say) the trail's group commit
	// holds a batch open for its entry, so calls at once share an fsync.
	defer d.audit.Begin()()
	t, ok := d.open(w, r)
	if !ok {
		return
	}
	if !mediaType(r.Header.Get("Content-Type"), "application/json") {
		refuse(w, r, http.StatusUnsupportedMediaType, codeInvalidRequest, "Send JSON-RPC as Content-Type: application/json.")
		return
	}
	body, err := httpx.ReadLimited(r, int64(t.agent.MaxRequestSize))
	if err != nil {
		status, msg := http.StatusBadRequest, "unreadable."
		var ae *apierror.Error
		if errors.As(err, &ae) {
			status, msg = ae.Status, ae.Message
		}
		refuse(w, r, status, codeInvalidRequest, "The body could not be read: "+msg)
		return
	}
	t.ex.PayloadSHA256 = sha256Hex(body)
	msgs, batch, err := readMessages(body)
	if err != nil {
		code := int64(codeParse)
		if errors.Is(err, errMalformed) {
			code = codeInvalidRequest
		}
		refuse(w, r, http.StatusBadRequest, code, "Not a JSON-RPC message the gateway accepts: "+err.Error()+".")
		return
	}
	if bad := unknownNotification(msgs); bad != "" {
		refuse(w, r, http.StatusBadRequest, codeInvalidRequest, "Notification "+quote(bad)+" is not one the gateway passes on.")
		return
	}
	if i := slices.IndexFunc(msgs, func(m *message) bool { return m.method == "initialize" }); i >= 0 {
		if batch || !msgs[i].isRequest() || r.Header.Get(hdrSession) != "" {
			refuse(w, r, http.StatusBadRequest, codeInvalidRequest, "initialize opens a session: send it alone, without Mcp-Session-Id.")
			return
		}
		if t.srv.members != nil {
			t.initVirtual(w, r, msgs[i])
			return
		}
		t.initialize(w, r, msgs[i])
		return
	}
	if !t.resume(w, r) {
		return
	}
	if t.srv.members != nil {
		t.serveVirtual(w, r, msgs, batch)
		return
	}
	if !slices.ContainsFunc(msgs, (*message).isRequest) {
		t.pass(w, r, msgs)
		return
	}
	a := &answer{w: w, canSSE: accepts(r, "text/event-stream"), gather: batch, batch: batch}
	for _, m := range msgs {
		if m.isRequest() {
			t.serve(r.Context(), m, a)
			continue
		}
		if err := t.tell(r.Context(), m); err != nil {
			// The batch's requests are answered; what went wrong with a
			// notification or answer beside them is the gateway's to log
			// (and, when refused, in the trail).
			d.log.Warn("mcp: message not passed on", "server", t.srv.name, "error", err.Error())
		}
	}
	a.finish(r)
}

// unknownNotification is the method of a notification the gateway does
// not pass on (MCP's are all notifications/...), or "".
func unknownNotification(msgs []*message) string {
	for _, m := range msgs {
		if m.isNotification() && !strings.HasPrefix(m.method, "notifications/") {
			return m.method
		}
	}
	return ""
}

// serve answers one request.
func (t *turn) serve(ctx context.Context, m *message, a *answer) {
	if m.method == "tools/call" {
		t.callTool(ctx, m, a)
		return
	}
	if _, ok := readMethods[m.method]; !ok {
		a.fail(m.id, codeMethodNotFound, "Method "+quote(m.method)+" is not served through the gateway.", nil)
		return
	}
	p, ok := readParamsOf(m)
	if !ok {
		a.fail(m.id, codeInvalidParams, "The params of "+m.method+" are not of the shape the gateway knows.", nil)
		return
	}
	body, ok := t.admit(ctx, m, a, t.redactName(p.subject()))
	if !ok {
		return
	}
	switch m.method {
	case "ping":
		t.relay(ctx, m, body, a, t.plain)
	case "tools/list":
		t.listTools(ctx, m, a, body)
	default:
		t.read(ctx, m, a, p, body)
	}
}

// pass passes notifications and responses on, answering 202 once the
// server took them all. A message the gateway refuses (a limit, a
// blocking detector) stops the POST with the refusal; those before it
// were passed on.
func (t *turn) pass(w http.ResponseWriter, r *http.Request, msgs []*message) {
	for _, m := range msgs {
		if err := t.tell(r.Context(), m); err != nil {
			if rf, ok := asRefusal(err); ok {
				refuseWith(w, r, rf)
				return
			}
			if errors.Is(err, errSessionGone) {
				t.lost(r.Context())
				refuse(w, r, http.StatusNotFound, codeInvalidRequest, "The MCP server ended the session: initialize a new one.")
				return
			}
			t.d.log.Warn("mcp: message not passed on", "server", t.srv.name, "error", err.Error())
			refuse(w, r, http.StatusBadGateway, codeUpstream, "MCP server "+quote(t.srv.name)+" did not take the message.")
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// tellServer sends the server a message it answers with no response (a
// notification, an answer to its request): body as the gateway passes it
// on.
func (t *turn) tellServer(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, t.srv.timeout)
	defer cancel()
	resp, err := t.d.send(ctx, t.srv, http.MethodPost, t.upstream(), body, "application/json, text/event-stream")
	if err != nil {
		return err
	}
	drain(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound && t.sess.Upstream != "":
		return errSessionGone
	case resp.StatusCode/100 != 2:
		return &statusError{resp.StatusCode}
	}
	return nil
}

// initParams are initialize's params, read strictly.
type initParams struct {
	ProtocolVersion string         `json:"protocolVersion"`
	Capabilities    jsontext.Value `json:"capabilities"`
	ClientInfo      jsontext.Value `json:"clientInfo"`
	Meta            jsontext.Value `json:"_meta,omitzero"`
}

// admitInit reads initialize strictly, spends one request of the agent's
// rate_limit and redacts it: the message as the gateway passes it on, or
// false when it answered the refusal. An initialize is metered and
// redacted (clientInfo, _meta) like any other request; it opens no
// session when refused.
func (t *turn) admitInit(w http.ResponseWriter, r *http.Request, m *message) ([]byte, bool) {
	var p initParams
	if m.params == nil || json.Unmarshal(m.params, &p, strict) != nil || p.ProtocolVersion == "" ||
		p.Capabilities.Kind() != '{' || p.ClientInfo.Kind() != '{' || (p.Meta != nil && p.Meta.Kind() != '{') {
		refuse(w, r, http.StatusBadRequest, codeInvalidParams, "initialize takes {protocolVersion, capabilities, clientInfo}.")
		return nil, false
	}
	if code, msg, data := t.spend(r.Context(), ""); code != 0 {
		t.refuseInit(w, r, m, &refusal{code, msg, data}, map[string]any{"decision": "limited"}, "limit")
		return nil, false
	}
	body, res, err := t.redactMessage(m)
	switch {
	case err != nil:
		t.refuseInit(w, r, m, &refusal{codeInvalidParams, "initialize cannot be scanned for redaction.", nil},
			map[string]any{"decision": "invalid", "reason": "unscannable"}, "invalid")
		return nil, false
	case res.Blocked != "":
		t.refuseInit(w, r, m, &refusal{codeBlocked, "initialize was refused: it contains data that may not leave (" + res.Blocked + ").",
			map[string]any{"detector": res.Blocked}}, map[string]any{"decision": "blocked", "blocked": res.Blocked}, "block")
		return nil, false
	}
	return body, true
}

// initialize opens a session: the server's initialize answer, when it
// negotiated a version the gateway serves, is passed on with the
// gateway's own session id. The answer is JSON even if the server
// streamed it: the session id must be in its headers before its body.
func (t *turn) initialize(w http.ResponseWriter, r *http.Request, m *message) {
	body, ok := t.admitInit(w, r, m)
	if !ok {
		return
	}
	a := &answer{w: w, gather: true}
	t.relay(r.Context(), m, body, a, func(resp *http.Response, um *message) []byte {
		if um.result == nil {
			return t.plain(resp, um)
		}
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(um.result, &res) != nil || !slices.Contains(protocolVersions, res.ProtocolVersion) {
			return errorResponse(m.id, codeUpstream, "MCP server "+quote(t.srv.name)+" negotiated no protocol version the gateway serves ("+
				strings.Join(protocolVersions, ", ")+").", nil)
		}
		up := resp.Header.Get(hdrSession)
		if up != "" && !validSessionID(up) {
			return errorResponse(m.id, codeUpstream, "MCP server "+quote(t.srv.name)+" gave a session id that is not visible ASCII.", nil)
		}
		s := Session{ID: newSessionID(), Agent: t.agent.ID, Server: t.srv.name, Upstream: up, Protocol: res.ProtocolVersion, Target: t.srv.url}
		if err := t.d.sessions.Put(r.Context(), s); err != nil {
			t.d.log.Error("mcp: session store", "error", err.Error())
			return errorResponse(m.id, codeUnavailable, "The gateway's session store is unavailable; retry shortly.", nil)
		}
		w.Header().Set(hdrSession, s.ID)
		return t.plain(resp, um)
	})
	a.finish(r)
}

// refuseInit audits a refused initialize as an mcp.call entry (there is
// no session yet, so none is named) and then answers the refusal; a trail
// that cannot take the entry turns it into 503, as for a refused call.
func (t *turn) refuseInit(w http.ResponseWriter, r *http.Request, m *message, rf *refusal, why map[string]any, outcome string) {
	sum := map[string]any{"server": t.srv.name, "method": "initialize", "jsonrpc_id": string(compact(m.id))}
	maps.Copy(sum, why)
	t.d.metrics.call(t.srv.name, methodLabel(m.method), outcome)
	if err := t.write(r.Context(), KindCall, sum, m.raw); err != nil {
		rf = &refusal{codeUnavailable, "The audit trail is unavailable.", nil}
	}
	refuseWith(w, r, rf)
}

// maxListen bounds the server's stream the gateway holds open for an
// agent: then it ends, and the agent's client opens another.
const maxListen = 30 * time.Minute

// listen serves GET /mcp/{server}: the server's own stream of messages to
// the agent's session, redacted. A server without one answers 405, and so
// does the gateway.
func (d *Door) listen(w http.ResponseWriter, r *http.Request) {
	t, ok := d.open(w, r)
	if !ok || !t.resume(w, r) {
		return
	}
	if t.srv.members != nil {
		w.Header().Set("Allow", "POST, DELETE")
		refuse(w, r, http.StatusMethodNotAllowed, codeInvalidRequest, "A virtual server offers no stream.")
		return
	}
	if !accepts(r, "text/event-stream") {
		refuse(w, r, http.StatusNotAcceptable, codeInvalidRequest, "GET opens an event stream: accept text/event-stream.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), maxListen)
	defer cancel()
	// The server's headers come within its timeout; the stream then lives
	// as long as the agent listens (maxListen at most).
	waiting := time.AfterFunc(t.srv.timeout, cancel)
	resp, err := d.send(ctx, t.srv, http.MethodGet, t.upstream(), nil, "text/event-stream")
	waiting.Stop()
	if err != nil {
		d.log.Warn("mcp: server stream not opened", "server", t.srv.name, "error", err.Error())
		refuse(w, r, http.StatusBadGateway, codeUpstream, "MCP server "+quote(t.srv.name)+" did not open its stream.")
		return
	}
	defer drain(resp)
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed:
		w.Header().Set("Allow", "POST, DELETE")
		refuse(w, r, http.StatusMethodNotAllowed, codeInvalidRequest, "MCP server "+quote(t.srv.name)+" offers no stream.")
		return
	case resp.StatusCode == http.StatusNotFound && t.sess.Upstream != "":
		t.lost(ctx)
		refuse(w, r, http.StatusNotFound, codeInvalidRequest, "The MCP server ended the session: initialize a new one.")
		return
	case resp.StatusCode != http.StatusOK || !streams(resp):
		refuse(w, r, http.StatusBadGateway, codeUpstream, "MCP server "+quote(t.srv.name)+" did not open its stream.")
		return
	}
	a := &answer{w: w, canSSE: true}
	a.stream()
	// A priming event with a fresh id (SEP-1699): a client that reconnects
	// after the stream ends sees progress and keeps its session. The
	// gateway replays nothing: what the server sent meanwhile is lost, as
	// without the gateway when the server keeps no event store.
	_, _ = w.Write([]byte("id: " + newSessionID() + "\n\n"))
	err = readEvents(resp.Body, maxMessage, func(ev event) (bool, error) {
		if len(ev.data) == 0 || (ev.name != "" && ev.name != "message") {
			return false, nil
		}
		msgs, _, err := readMessages(ev.data)
		if err != nil {
			return true, err
		}
		for _, um := range msgs {
			t.fromServer(um, a)
		}
		return ctx.Err() != nil, nil
	})
	if err != nil && ctx.Err() == nil {
		d.log.Warn("mcp: server stream ended", "server", t.srv.name, "error", err.Error())
	}
}

// end serves DELETE /mcp/{server}: the session ends at the server (best
// effort, within its timeout) and at the gateway.
func (d *Door) end(w http.ResponseWriter, r *http.Request) {
	t, ok := d.open(w, r)
	if !ok || !t.resume(w, r) {
		return
	}
	if t.sess.Upstream != "" {
		d.closeSession(r.Context(), t.srv, t.upstream())
	}
	t.closeMembers(r.Context(), t.sess)
	t.lost(r.Context())
	w.WriteHeader(http.StatusNoContent)
}
