package mcp

import (
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
)

// Headers of the Streamable HTTP transport.
const (
	hdrSession  = "Mcp-Session-Id"
	hdrProtocol = "Mcp-Protocol-Version"
)

// protocolVersions are the MCP versions the door serves: those whose
// sessions and messages it knows. A newer one (the stateless 2026
// revision: server/discover, per-request metadata) is refused, and its
// clients fall back to the newest of these.
var protocolVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// turn is one HTTP request of an agent at /mcp/{server}: the configuration
// it is served under, the server, the agent and (once resumed) its session.
type turn struct {
	d     *Door
	c     *conf
	srv   *server
	ex    *scope.Exchange
	agent *roster.Agent
	sess  Session
	// protocol is the version the request speaks (its header, else the
	// session's).
	protocol string
	// via is the virtual server the request came through, if any: srv is
	// then its member server.
	via string
	// behalf is the person a client's access token acts for (the entries
	// name them beside the agent); nil for an agent's own credential.
	behalf map[string]any
}

// open checks what every method needs: a configured server, an agent that
// has it in its mcp_tools, a same-origin browser if any, a known protocol
// version. It answers the refusal itself.
func (d *Door) open(w http.ResponseWriter, r *http.Request) (*turn, bool) {
	c := d.conf.Load()
	ex := scope.Get(r.Context())
	name := r.PathValue("server")
	srv := c.servers[name]
	if srv == nil {
		refuse(w, r, http.StatusNotFound, codeInvalidRequest, "No MCP server "+quote(name)+" is configured.")
		return nil, false
	}
	agent := ex.Agent
	if !srv.mayUse(agent.MCPTools) {
		refuse(w, r, http.StatusForbidden, codeDenied, "Agent "+quote(agent.ID)+" may not use MCP server "+quote(name)+" (it has no mcp_tools entry for it).")
		return nil, false
	}
	if !sameOrigin(r) {
		// DNS rebinding: a browser page must not reach the door, whatever
		// token it holds.
		refuse(w, r, http.StatusForbidden, codeInvalidRequest, "Cross-origin requests are refused.")
		return nil, false
	}
	t := &turn{d: d, c: c, srv: srv, ex: ex, agent: agent, behalf: behalfOf(r)}
	if v := r.Header.Get(hdrProtocol); v != "" {
		if !slices.Contains(protocolVersions, v) {
			refuse(w, r, http.StatusBadRequest, codeInvalidRequest, "MCP-Protocol-Version "+quote(v)+" is not one the gateway serves ("+strings.Join(protocolVersions, ", ")+").")
			return nil, false
		}
		t.protocol = v
	}
	return t, true
}

// resume finds the agent's session. A session of another agent or server,
// an expired one and one that never was are the same 404 (the agent
// initializes again); no session id is a 400.
func (t *turn) resume(w http.ResponseWriter, r *http.Request) bool {
	id := r.Header.Get(hdrSession)
	if id == "" {
		refuse(w, r, http.StatusBadRequest, codeInvalidRequest, "Mcp-Session-Id is required: send initialize first.")
		return false
	}
	s, ok, err := t.d.sessions.Get(r.Context(), id)
	if err != nil {
		t.d.log.Error("mcp: session store", "error", err.Error())
		refuse(w, r, http.StatusServiceUnavailable, codeUnavailable, "The gateway's session store is unavailable; retry shortly.")
		return false
	}
	if !ok || s.Agent != t.agent.ID || s.Server != t.srv.name || s.Target != t.srv.url {
		refuse(w, r, http.StatusNotFound, codeInvalidRequest, "Session not found: initialize a new one.")
		return false
	}
	t.sess = s
	if t.protocol == "" {
		t.protocol = s.Protocol
	}
	return true
}

// upstream is the server side of the session, as a request to it carries
// it (resume has already fallen back to the session's protocol version).
func (t *turn) upstream() hop {
	return hop{session: t.sess.Upstream, protocol: t.protocol, requestID: t.ex.RequestID}
}

// refuse answers a refusal of the whole HTTP request: status, and a
// JSON-RPC error without an id as the body (no message was taken).
func refuse(w http.ResponseWriter, r *http.Request, status int, code int64, msg string) {
	note(r, status, code)
	httpx.WriteRawJSON(w, status, errorResponse(nil, code, msg, nil))
}

// note records an error on the Exchange, for the access log and metrics.
func note(r *http.Request, status int, code int64) {
	if ex := scope.Lookup(r.Context()); ex != nil {
		ex.Status, ex.ErrCode = status, codeName(code)
	}
}

// codeName names an error code in the access log.
func codeName(code int64) string {
	switch code {
	case codeParse:
		return "mcp_parse_error"
	case codeInvalidRequest:
		return "mcp_invalid_request"
	case codeMethodNotFound:
		return "mcp_method_not_found"
	case codeInvalidParams:
		return "mcp_invalid_params"
	case codeDenied:
		return "mcp_denied"
	case codeEscalated:
		return "mcp_escalated"
	case codeRateLimited:
		return "mcp_rate_limited"
	case codeBlocked:
		return "mcp_content_filter"
	case codeUpstream:
		return "mcp_upstream_error"
	case codeUnavailable:
		return "mcp_unavailable"
	}
	return "mcp_internal_error"
}

// sameOrigin accepts a request without Origin (an agent) or whose Origin
// is the gateway's own host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// mediaType reports whether the header v names media type want (compared
// case-insensitively, parameters ignored).
func mediaType(v, want string) bool {
	mt, _, err := mime.ParseMediaType(v)
	return err == nil && mt == want
}

// accepts reports whether the request's Accept lists media type want.
func accepts(r *http.Request, want string) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && (mt == want || mt == "*/*") {
				return true
			}
		}
	}
	return false
}

// quote quotes a name for a message, at most 80 runes of it.
func quote(s string) string {
	if utf8.RuneCountInString(s) > 80 {
		s = string([]rune(s)[:80]) + "..."
	}
	return strconv.Quote(s)
}
