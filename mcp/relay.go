package mcp

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/redact"
)

// answer is what goes back to the agent for one POST: one JSON document,
// or an event stream once the server streams its answer (to an agent that
// accepts one, for a single request).
type answer struct {
	w      http.ResponseWriter
	canSSE bool
	// gather: one JSON document whatever the server does (a batch, an
	// initialize); what the server sends besides responses is dropped.
	gather bool
	batch  bool
	// sse: the answer is an event stream, its headers sent.
	sse bool
	out [][]byte
	// status, when set, is the status of a JSON answer (404: the server
	// ended the session).
	status int
	// code is the first error code answered, for the access log.
	code int64
}

// stream makes the answer an event stream, if it may be one.
func (a *answer) stream() {
	if a.sse || a.gather || !a.canSSE || a.status != 0 {
		return
	}
	h := a.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	a.w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(a.w).Flush()
	a.sse = true
}

// respond passes on a response to one of the agent's requests.
func (a *answer) respond(msg []byte) {
	if a.sse {
		_ = writeEvent(a.w, msg)
		return
	}
	a.out = append(a.out, msg)
}

// aside passes on what a server sends besides its response (progress,
// logs, its own requests): only a stream can carry it.
func (a *answer) aside(msg []byte) {
	if a.sse {
		_ = writeEvent(a.w, msg)
	}
}

// fail answers a request with a JSON-RPC error of the gateway.
func (a *answer) fail(id jsontext.Value, code int64, msg string, data any) {
	if a.code == 0 {
		a.code = code
	}
	a.respond(errorResponse(id, code, msg, data))
}

// finish writes a JSON answer (a stream is already written).
func (a *answer) finish(r *http.Request) {
	if a.code != 0 {
		note(r, max(a.status, http.StatusOK), a.code)
	}
	if a.sse {
		return
	}
	status := http.StatusOK
	if a.status != 0 {
		status = a.status
	}
	var body []byte
	switch {
	case a.batch:
		body = append(body, '[')
		for i, m := range a.out {
			if i > 0 {
				body = append(body, ',')
			}
			body = append(body, m...)
		}
		body = append(body, ']')
	case len(a.out) > 0:
		body = a.out[0]
	default:
		a.w.WriteHeader(http.StatusAccepted)
		return
	}
	httpx.WriteRawJSON(a.w, status, body)
}

// relay sends body (m as the gateway passes it on) to the server and passes
// the server's answer on through a: what the server sends before its
// response, then the response to m as final makes it. Whatever happens, m
// gets exactly one response.
func (t *turn) relay(ctx context.Context, m *message, body []byte, a *answer, final func(resp *http.Response, um *message) []byte) {
	ctx, cancel := context.WithTimeout(ctx, t.srv.timeout)
	defer cancel()
	resp, err := t.d.send(ctx, t.srv, http.MethodPost, t.upstream(), body, "application/json, text/event-stream")
	if err != nil {
		t.d.log.Warn("mcp: server did not answer", "server", t.srv.name, "request_id", t.ex.RequestID, "error", err.Error())
		a.fail(m.id, codeUpstream, failure(err, "MCP server "+quote(t.srv.name)+" did not answer."), nil)
		return
	}
	defer drain(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound && t.sess.Upstream != "":
		t.lost(ctx)
		a.status = http.StatusNotFound
		a.fail(m.id, codeInvalidRequest, "The MCP server ended the session: initialize a new one.", nil)
		return
	case resp.StatusCode != http.StatusOK:
		a.fail(m.id, codeUpstream, "MCP server "+quote(t.srv.name)+" answered HTTP "+strconv.Itoa(resp.StatusCode)+".", nil)
		return
	}
	if streams(resp) {
		a.stream()
	}
	answered := false
	err = readReply(resp, func(um *message) (bool, error) {
		if !um.isResponse() {
			t.fromServer(um, a)
			return false, nil
		}
		if !sameID(um.id, m.id) {
			return true, errStray
		}
		answered = true
		a.respond(final(resp, um))
		return true, nil
	})
	if !answered {
		reason := "it ended its answer without a response"
		if err != nil {
			t.d.log.Warn("mcp: server's answer refused", "server", t.srv.name, "request_id", t.ex.RequestID, "error", err.Error())
			reason = "its answer is not one the gateway passes on"
		}
		a.fail(m.id, codeUpstream, "MCP server "+quote(t.srv.name)+": "+reason+".", nil)
	}
}

// errStray is a response to a request the gateway did not send.
var errStray = errors.New("a response to another request")

// lost forgets a session its server ended.
func (t *turn) lost(ctx context.Context) {
	if err := t.d.sessions.Delete(context.WithoutCancel(ctx), t.sess.ID); err != nil {
		t.d.log.Warn("mcp: session store", "error", err.Error())
	}
}

// fromServer passes on what a server sends of its own accord (a
// notification, a request to the client), redacted; a blocked one is
// withheld. A changed tool list makes the gateway read it again.
func (t *turn) fromServer(um *message, a *answer) {
	if um.method == "notifications/tools/list_changed" {
		t.srv.catalog.invalidate()
	}
	msg, res, err := t.redactMessage(um)
	if err != nil || res.Blocked != "" {
		t.d.log.Warn("mcp: server message withheld", "server", t.srv.name, "method", um.method, "blocked", res.Blocked)
		return
	}
	a.aside(msg)
}

// plain is the default final: the server's response, redacted; a blocked
// one becomes an error.
func (t *turn) plain(_ *http.Response, um *message) []byte {
	msg, res, err := t.redactMessage(um)
	if err != nil {
		return errorResponse(um.id, codeUpstream, "MCP server "+quote(t.srv.name)+" answered something the gateway cannot scan.", nil)
	}
	if res.Blocked != "" {
		return blockedAnswer(um.id, res.Blocked)
	}
	return msg
}

// blockedAnswer withholds an answer a blocking detector matched.
func blockedAnswer(id jsontext.Value, detector string) []byte {
	return errorResponse(id, codeBlocked, "The answer was withheld: it contains data that may not reach the agent ("+detector+").",
		map[string]any{"detector": detector})
}

// redactMessage redacts the strings a message carries (params, result,
// error message and data; never the envelope's id and method) and returns
// it re-encoded, compact.
func (t *turn) redactMessage(m *message) ([]byte, redact.Result, error) {
	red := t.c.red
	switch {
	case m.errObj != nil:
		e := *m.errObj
		var res redact.Result
		if red != nil {
			e.Message, res = red.String(e.Message)
			if e.Data != nil {
				d, dr, err := red.JSON(e.Data)
				if err != nil {
					return nil, res, err
				}
				e.Data = d
				res.Add(dr)
			}
		}
		return withError(m.id, &e), res, nil
	case m.result != nil:
		out, res, err := t.redactJSON(m.result)
		if err != nil {
			return nil, res, err
		}
		return response(m.id, out), res, nil
	}
	if m.params == nil {
		return compact(m.raw), redact.Result{}, nil
	}
	out, res, err := t.redactJSON(m.params)
	if err != nil {
		return nil, res, err
	}
	return request(m.id, m.method, out), res, nil
}

// redactJSON redacts every string of v (compacted when redaction is off).
func (t *turn) redactJSON(v jsontext.Value) (jsontext.Value, redact.Result, error) {
	if t.c.red == nil {
		return compact(v), redact.Result{}, nil
	}
	return t.c.red.JSON(v)
}
