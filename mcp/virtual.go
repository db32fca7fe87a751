package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/policy"
)

// A virtual server is one endpoint, /mcp/{name}, combining the tools,
// resources and prompts of several configured servers, each tool's and
// prompt's name and each resource's URI behind its server's prefix. The
// gateway answers initialize, ping and tools/list itself; every
// tools/call is routed by its prefix to its server and governed there
// exactly as a call to /mcp/{server} (the agent's mcp_tools entry for that
// server, the policy's input naming that server and tool, its limits,
// redaction, approvals and audit); resources and prompts likewise
// (virtual_read.go). An agent reaches a virtual server when its mcp_tools
// name one of its servers.

// setMembers resolves a virtual server's members among servers (the
// loader checked they exist and are not virtual, and that no prefix
// begins another), in their order, and makes its url stand for them: a reload that changes a member's
// target or a prefix ends the virtual server's sessions.
func (s *server) setMembers(ms []config.MCPMember, servers map[string]*server) {
	h := sha256.New()
	for _, m := range ms {
		srv := servers[m.Name]
		if srv == nil || srv.members != nil {
			continue
		}
		s.members = append(s.members, member{srv: srv, prefix: m.Prefix})
		h.Write([]byte(m.Name + "\x00" + m.Prefix + "\x00" + srv.url + "\x00"))
	}
	s.url += "/" + hex.EncodeToString(h.Sum(nil)[:12])
}

// mayUse reports whether the agent may connect: any server of a virtual
// one, the server itself otherwise.
func (s *server) mayUse(tools map[string][]string) bool {
	if s.members == nil {
		_, ok := tools[s.name]
		return ok
	}
	for _, m := range s.members {
		if _, ok := tools[m.srv.name]; ok {
			return true
		}
	}
	return false
}

// memberTurn is t as a turn of one member server: its session with that
// server, its protocol version.
func (t *turn) memberTurn(m member) *turn {
	ms := t.sess.Members[m.srv.name]
	mt := *t
	mt.srv = m.srv
	mt.sess = Session{ID: t.sess.ID, Agent: t.sess.Agent, Server: m.srv.name, Upstream: ms.Upstream, Protocol: ms.Protocol, Target: m.srv.url}
	mt.protocol = ms.Protocol
	mt.via = t.srv.name
	return &mt
}

// initVirtual opens a virtual session: the gateway initializes each
// member server with the agent's (redacted) initialize and answers it
// itself. A member that fails fails the whole initialize: a session the
// agent holds reaches every tool it was shown.
func (t *turn) initVirtual(w http.ResponseWriter, r *http.Request, m *message) {
	body, ok := t.admitInit(w, r, m)
	if !ok {
		return
	}
	sent, err := readMessage(body)
	if err != nil {
		refuse(w, r, http.StatusBadRequest, codeInvalidParams, "initialize takes {protocolVersion, capabilities, clientInfo}.")
		return
	}
	var asked struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(sent.params, &asked)
	version := asked.ProtocolVersion
	if !slices.Contains(protocolVersions, version) {
		version = protocolVersions[len(protocolVersions)-1]
	}
	s := Session{ID: newSessionID(), Agent: t.agent.ID, Server: t.srv.name, Protocol: version, Target: t.srv.url, Members: map[string]Member{},
		CursorKey: newSessionID()}
	for _, mb := range t.srv.members {
		ms, err := t.d.openMember(r.Context(), mb.srv, t.ex.RequestID, sent.params)
		if err != nil {
			t.d.log.Warn("mcp: virtual server's member not initialized", "server", t.srv.name, "member", mb.srv.name, "error", err.Error())
			t.closeMembers(r.Context(), s)
			refuse(w, r, http.StatusBadGateway, codeUpstream, "MCP server "+quote(mb.srv.name)+" of "+quote(t.srv.name)+" did not initialize.")
			return
		}
		s.Members[mb.srv.name] = ms
	}
	if err := t.d.sessions.Put(r.Context(), s); err != nil {
		t.d.log.Error("mcp: session store", "error", err.Error())
		t.closeMembers(r.Context(), s)
		refuse(w, r, http.StatusServiceUnavailable, codeUnavailable, "The gateway's session store is unavailable; retry shortly.")
		return
	}
	caps := map[string]any{"tools": map[string]any{}, "resources": map[string]any{}, "prompts": map[string]any{}}
	result, _ := json.Marshal(map[string]any{"protocolVersion": version, "capabilities": caps,
		"serverInfo": map[string]any{"name": t.srv.name, "version": "1"}}, json.Deterministic(true))
	w.Header().Set(hdrSession, s.ID)
	a := &answer{w: w, gather: true}
	a.respond(response(m.id, result))
	a.finish(r)
}

// openMember initializes one member server for a virtual session (and
// tells it the client is initialized).
func (d *Door) openMember(ctx context.Context, srv *server, requestID string, params jsontext.Value) (Member, error) {
	ctx, cancel := context.WithTimeout(ctx, srv.timeout)
	defer cancel()
	h := hop{requestID: requestID}
	resp, result, err := d.ask(ctx, srv, h, request(jsontext.Value("1"), "initialize", params))
	if err != nil {
		return Member{}, err
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(result, &init); err != nil || !slices.Contains(protocolVersions, init.ProtocolVersion) {
		return Member{}, errors.New("the server negotiated no protocol version the gateway serves")
	}
	ms := Member{Upstream: resp.Header.Get(hdrSession), Protocol: init.ProtocolVersion}
	if ms.Upstream != "" && !validSessionID(ms.Upstream) {
		return Member{}, errors.New("the server's session id is not visible ASCII")
	}
	h.session, h.protocol = ms.Upstream, ms.Protocol
	if err := d.tell(ctx, srv, h, request(nil, "notifications/initialized", nil)); err != nil {
		d.closeSession(ctx, srv, h)
		return Member{}, err
	}
	return ms, nil
}

// closeMembers ends a virtual session's sessions with its servers.
func (t *turn) closeMembers(ctx context.Context, s Session) {
	for _, mb := range t.srv.members {
		if ms, ok := s.Members[mb.srv.name]; ok && ms.Upstream != "" {
			t.d.closeSession(ctx, mb.srv, hop{session: ms.Upstream, protocol: ms.Protocol, requestID: t.ex.RequestID})
		}
	}
}

// serveVirtual answers a POST to a virtual session. Notifications are
// counted and not passed on (the gateway initialized the servers);
// answers to a server's requests have no way back to it and are refused.
func (t *turn) serveVirtual(w http.ResponseWriter, r *http.Request, msgs []*message, batch bool) {
	if slices.ContainsFunc(msgs, (*message).isResponse) {
		refuse(w, r, http.StatusBadRequest, codeInvalidRequest, "A virtual server passes no answer to a server's request on.")
		return
	}
	a := &answer{w: w, canSSE: accepts(r, "text/event-stream"), gather: batch, batch: batch}
	for _, m := range msgs {
		switch {
		case m.isNotification():
			if code, msg, data := t.spend(r.Context(), ""); code != 0 {
				refuseWith(w, r, &refusal{code, msg, data})
				return
			}
		case m.method == "tools/call":
			t.routeCall(r.Context(), m, a)
		case m.method == "ping":
			if _, ok := t.admit(r.Context(), m, a, ""); ok {
				a.respond(response(m.id, jsontext.Value("{}")))
			}
		case m.method == "tools/list":
			if _, ok := t.admit(r.Context(), m, a, ""); ok {
				t.virtualTools(r.Context(), m, a)
			}
		case virtualLists[m.method].items != "":
			t.virtualList(r.Context(), m, a)
		case m.method == "resources/read" || m.method == "prompts/get":
			t.routeRead(r.Context(), m, a)
		default:
			a.fail(m.id, codeMethodNotFound, "Method "+quote(m.method)+" is not served by a virtual server.", nil)
		}
	}
	a.finish(r)
}

// virtualTools answers tools/list: each member's tools as the gateway
// read them, kept when the agent's mcp_tools for that server name them
// and the policy does not deny them there, under the member's prefix.
func (t *turn) virtualTools(ctx context.Context, m *message, a *answer) {
	tools := []jsontext.Value{}
	for _, mb := range t.srv.members {
		mt := t.memberTurn(mb)
		list, err := mb.srv.catalog.all(ctx, func(ctx context.Context) (map[string]toolInfo, error) { return t.d.readTools(ctx, mb.srv) })
		if err != nil {
			t.d.log.Warn("mcp: tool list unreadable", "server", mb.srv.name, "error", err.Error())
			a.fail(m.id, codeUpstream, "The tool list of MCP server "+quote(mb.srv.name)+" could not be read.", nil)
			return
		}
		for _, n := range slices.Sorted(maps.Keys(list)) {
			ti := list[n]
			if !mt.allowedTool(n) {
				continue
			}
			if ok, _ := mt.servable(ctx, ti); !ok {
				continue
			}
			in, err := toolInput(ti)
			if err != nil || mt.decide(ctx, "tools/list", map[string]any{"tool": in}, jsontext.Value("{}"), true).Decision == policy.MCPDeny {
				continue
			}
			raw, err := renamed(ti.raw, mb.prefix+n)
			if err != nil {
				continue
			}
			tools = append(tools, raw)
		}
	}
	result, err := json.Marshal(map[string]any{"tools": tools}, json.Deterministic(true))
	if err != nil {
		a.fail(m.id, codeUpstream, "The tool list could not be written.", nil)
		return
	}
	a.respond(response(m.id, result))
}

// routeCall sends a tools/call to the member its name's prefix names,
// with the name its server knows: from there on it is that server's call.
func (t *turn) routeCall(ctx context.Context, m *message, a *answer) {
	var p map[string]jsontext.Value
	var name string
	if m.params == nil || json.Unmarshal(m.params, &p) != nil || json.Unmarshal(p["name"], &name) != nil {
		a.fail(m.id, codeInvalidParams, "tools/call takes {name, arguments (an object), _meta}.", nil)
		return
	}
	for _, mb := range t.srv.members {
		tool, ok := strings.CutPrefix(name, mb.prefix)
		if !ok || tool == "" {
			continue
		}
		um, err := rerouted(m, "name", tool)
		if err != nil {
			break
		}
		t.memberTurn(mb).callTool(ctx, um, a)
		return
	}
	a.fail(m.id, codeInvalidParams, "MCP server "+quote(t.srv.name)+" lists no tool "+quote(name)+".", nil)
}

// renamed is a tool's definition with another name.
func renamed(raw jsontext.Value, name string) (jsontext.Value, error) {
	var def map[string]jsontext.Value
	if err := json.Unmarshal(raw, &def); err != nil {
		return nil, err
	}
	var err error
	if def["name"], err = json.Marshal(name); err != nil {
		return nil, err
	}
	return json.Marshal(def, json.Deterministic(true))
}
