package mcp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
)

// readsPolicy allows everything but the listings of the servers in
// noList and the reads named in deny, and keeps "method server subject"
// of every input it decided.
type readsPolicy struct {
	mu     sync.Mutex
	noList map[string]bool
	deny   map[string]bool
	seen   []string
}

func (p *readsPolicy) MCP(_ context.Context, in map[string]any) (policy.MCPDecision, error) {
	subject := ""
	if r, ok := in["resource"].(map[string]any); ok {
		subject, _ = r["uri"].(string)
	}
	if r, ok := in["prompt"].(map[string]any); ok {
		subject, _ = r["name"].(string)
	}
	server, method := in["server"].(string), in["method"].(string)
	p.mu.Lock()
	p.seen = append(p.seen, method+" "+server+" "+subject)
	p.mu.Unlock()
	if (subject == "" && strings.HasSuffix(method, "/list") && p.noList[server]) || p.deny[subject] {
		return policy.MCPDecision{Decision: policy.MCPDeny, Reason: "not this one"}, nil
	}
	return policy.MCPDecision{Decision: policy.MCPAllow}, nil
}

func (p *readsPolicy) decided(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.seen, s)
}

// readsServer is a Streamable HTTP server of the Go SDK named name, one
// item per page, with a resource per uri (its text "name read uri"), a
// resource template and a prompt; reads counts the reads it served.
func readsServer(t *testing.T, name string, uris []string, reads *atomic.Int32) string {
	s := sdk.NewServer(&sdk.Implementation{Name: name, Version: "1"}, &sdk.ServerOptions{PageSize: 1})
	for _, uri := range uris {
		s.AddResource(&sdk.Resource{URI: uri, Name: strings.TrimPrefix(uri, name+"://"), MIMEType: "text/plain"},
			func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				reads.Add(1)
				return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: name + " read " + req.Params.URI}}}, nil
			})
	}
	s.AddResourceTemplate(&sdk.ResourceTemplate{URITemplate: name + "://notes/{id}", Name: "note"},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			reads.Add(1)
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: name + " note " + req.Params.URI}}}, nil
		})
	s.AddPrompt(&sdk.Prompt{Name: "greet", Arguments: []*sdk.PromptArgument{{Name: "who"}}},
		func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			reads.Add(1)
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: name + " greets " + req.Params.Arguments["who"]}}}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestVirtualServerResourcesAndPrompts: one endpoint combines two SDK
// servers' resources, resource templates and prompts for the official
// SDK client, one server's pages after the other's, each URI, template
// and name behind its server's prefix; reads and prompts reach their own
// server under their own names, decided by the policy for that server;
// a server the agent's mcp_tools do not name is neither listed nor read,
// and a server whose listing the policy refuses is skipped. An unknown
// prefix, a URI of no member and a cursor the gateway did not issue (or
// issued for another listing) are refused with a JSON-RPC error, and
// reach no server.
func TestVirtualServerResourcesAndPrompts(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var docsReads, wikiReads, hiddenReads atomic.Int32
	agent := &roster.Agent{ID: "a1", MaxRequestSize: 1 << 20, MCPTools: map[string][]string{"docs": {}, "wiki": {}, "quiet": {}}}
	cfg := &config.Config{Agents: map[string]*roster.Agent{"a1": agent}}
	cfg.Gateway.MCP.Servers = []config.MCPServer{
		{Name: "docs", URL: readsServer(t, "docs", []string{"docs://a", "docs://b"}, &docsReads), Timeout: config.Duration(10 * time.Second)},
		{Name: "hidden", URL: readsServer(t, "hidden", []string{"hidden://x"}, &hiddenReads), Timeout: config.Duration(10 * time.Second)},
		{Name: "quiet", URL: readsServer(t, "quiet", []string{"quiet://q"}, &hiddenReads), Timeout: config.Duration(10 * time.Second)},
		{Name: "wiki", URL: readsServer(t, "wiki", []string{"wiki://home"}, &wikiReads), Timeout: config.Duration(10 * time.Second)},
		{Name: "all", Servers: []config.MCPMember{{Name: "docs", Prefix: "d_"}, {Name: "hidden", Prefix: "h_"}, {Name: "quiet", Prefix: "q_"}, {Name: "wiki", Prefix: "w_"}}},
	}
	pol := &readsPolicy{noList: map[string]bool{"quiet": true}, deny: map[string]bool{"docs://b": true}}
	d, err := New(Deps{Config: cfg, Policy: pol, Limiter: limit.NewMemory(), Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	cs := sdkConnect(t, ctx, serveAgent(t, d, agent)+"/mcp/all")

	var uris, templates, prompts []string
	pages := 0
	var cursor string
	for {
		res, err := cs.ListResources(ctx, &sdk.ListResourcesParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("resources/list page %d: %v", pages, err)
		}
		pages++
		for _, r := range res.Resources {
			uris = append(uris, r.URI)
		}
		if cursor = res.NextCursor; cursor == "" || pages > 10 {
			break
		}
	}
	if want := []string{"d_docs://a", "d_docs://b", "w_wiki://home"}; !slices.Equal(uris, want) || pages < 3 {
		t.Errorf("resources %v in %d pages, want %v one per page", uris, pages, want)
	}
	for r, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatalf("resources/templates/list: %v", err)
		}
		templates = append(templates, r.URITemplate)
	}
	if want := []string{"d_docs://notes/{id}", "w_wiki://notes/{id}"}; !slices.Equal(templates, want) {
		t.Errorf("templates %v, want %v", templates, want)
	}
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		prompts = append(prompts, p.Name)
	}
	if want := []string{"d_greet", "w_greet"}; !slices.Equal(prompts, want) {
		t.Errorf("prompts %v, want %v", prompts, want)
	}

	read := func(uri string) (string, error) {
		res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		if err != nil {
			return "", err
		}
		return res.Contents[0].Text, nil
	}
	for uri, want := range map[string]string{"d_docs://a": "docs read docs://a", "w_wiki://home": "wiki read wiki://home", "d_docs://notes/7": "docs note docs://notes/7"} {
		if got, err := read(uri); err != nil || got != want {
			t.Errorf("read %s = %q, %v; want %q", uri, got, err, want)
		}
	}
	if got, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "w_greet", Arguments: map[string]string{"who": "ann"}}); err != nil ||
		got.Messages[0].Content.(*sdk.TextContent).Text != "wiki greets ann" {
		t.Errorf("prompt w_greet: %v %v", got, err)
	}
	for _, want := range []string{"resources/read docs docs://a", "resources/read wiki wiki://home", "prompts/get wiki greet", "resources/list docs ", "resources/list quiet "} {
		if !pol.decided(want) {
			t.Errorf("the policy did not decide %q (it decided %q)", want, pol.seen)
		}
	}
	before := docsReads.Load() + wikiReads.Load() + hiddenReads.Load()

	refused := func(what string, err error, code int64, text string) {
		t.Helper()
		var e *jsonrpc.Error
		if err == nil || !strings.Contains(err.Error(), text) {
			t.Errorf("%s: %v, want an error saying %q", what, err, text)
		} else if !errors.As(err, &e) || e.Code != code {
			t.Errorf("%s: %v, want code %d", what, err, code)
		}
	}
	_, err = read("d_docs://b")
	refused("a read the policy denies", err, codeDenied, "Denied by policy")
	_, err = read("h_hidden://x")
	refused("a server without an mcp_tools entry", err, codeDenied, "no mcp_tools entry")
	_, err = read("x_docs://a")
	refused("an unknown prefix", err, codeInvalidParams, "has no resource")
	_, err = read("d_")
	refused("a bare prefix", err, codeInvalidParams, "has no resource")
	_, err = cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "z_greet"})
	refused("an unknown prompt prefix", err, codeInvalidParams, "has no prompt")

	first, err := cs.ListResources(ctx, nil)
	if err != nil || first.NextCursor == "" {
		t.Fatalf("first page: %v %v", first, err)
	}
	payload, mac, _ := strings.Cut(first.NextCursor, ".")
	for what, c := range map[string]string{
		"a server's own cursor":          "eyJpZCI6Mn0",
		"a cursor naming another server": "aGlkZGVuAA." + mac,
		"a cursor with its MAC cut":      payload + "." + mac[:10],
		"nothing":                        ".",
	} {
		_, err := cs.ListResources(ctx, &sdk.ListResourcesParams{Cursor: c})
		refused(what, err, codeInvalidParams, "not issued by this gateway")
	}
	_, err = cs.ListPrompts(ctx, &sdk.ListPromptsParams{Cursor: first.NextCursor})
	refused("a resources/list cursor sent to prompts/list", err, codeInvalidParams, "not issued by this gateway")
	other := sdkConnect(t, ctx, serveAgent(t, d, agent)+"/mcp/all")
	_, err = other.ListResources(ctx, &sdk.ListResourcesParams{Cursor: first.NextCursor})
	refused("another session's cursor", err, codeInvalidParams, "not issued by this gateway")
	if after := docsReads.Load() + wikiReads.Load() + hiddenReads.Load(); after != before {
		t.Errorf("refused reads reached a server: %d reads, want %d", after, before)
	}
}

// FuzzVirtualCursor: a cursor an agent sends back is refused unless this
// session issued it for this listing, and then names a member the agent
// may list with the member's cursor as issued; nothing panics.
func FuzzVirtualCursor(f *testing.F) {
	docs, wiki := &server{name: "docs"}, &server{name: "wiki"}
	virt := &server{name: "all", members: []member{{srv: docs, prefix: "d_"}, {srv: wiki, prefix: "w_"}}}
	t := &turn{srv: virt, agent: &roster.Agent{ID: "a1", MCPTools: map[string][]string{"docs": {}, "wiki": {}}}, sess: Session{CursorKey: "k1"}}
	issued := t.issueCursor("resources/list", 1, "page-2")
	f.Add(issued)
	f.Add(".")
	f.Add("d2lraQBwYWdlLTI.")
	f.Fuzz(func(tt *testing.T, c string) {
		i, cursor, err := t.readCursor("resources/list", c)
		if err != nil {
			return
		}
		if c != issued || i != 1 || cursor != "page-2" {
			tt.Fatalf("cursor %q read as member %d cursor %q: not one this session issued", c, i, cursor)
		}
		if _, _, err := t.readCursor("prompts/list", c); err == nil {
			tt.Fatal("a resources/list cursor read for prompts/list")
		}
	})
}

// TestVirtualServerHeldCallReview: a call held through a virtual server
// opens a review that names the member server and tool, the virtual
// server it came through, until when the agent waits and the person it
// acts for; approved, the waiting call runs at its own server.
func TestVirtualServerHeldCallReview(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	agent := &roster.Agent{ID: "a1", MaxRequestSize: 1 << 20, MCPTools: map[string][]string{"files": {"delete_file"}}}
	cfg := &config.Config{Agents: map[string]*roster.Agent{"a1": agent}}
	cfg.Gateway.MCP.Servers = []config.MCPServer{
		{Name: "files", URL: filesSDKServer(t), Timeout: config.Duration(10 * time.Second), Hold: config.Duration(time.Minute)},
		{Name: "all", Servers: []config.MCPMember{{Name: "files", Prefix: "fs_"}}},
	}
	cfg.Protocol.Timeouts.Escalation = config.Duration(time.Hour)
	opener := &fakeOpener{}
	d, err := New(Deps{Config: cfg, Policy: fakePolicy{policy.MCPDecision{Decision: policy.MCPEscalate, Reason: "a person decides"}},
		Limiter: limit.NewMemory(), Log: discard(), Opener: opener})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = scope.Attach(r, &scope.Exchange{RequestID: "req-1", Agent: agent})
		r = r.WithContext(door.WithBehalf(r.Context(), door.Behalf{Subject: "u-1", Email: "ann@example.org", Name: "ann@example.org"}))
		r.SetPathValue("server", strings.TrimPrefix(r.URL.Path, "/mcp/"))
		d.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cs := sdkConnect(t, ctx, srv.URL+"/mcp/all")
	start := time.Now()
	type result struct {
		text string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		text, err := callText(t, ctx, cs, "fs_delete_file", "x")
		done <- result{text, err}
	}()
	for ctx.Err() == nil {
		opener.mu.Lock()
		n := len(opener.reqs)
		opener.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	id, req := opener.last()
	r, err := readReview(req.Content)
	if err != nil {
		t.Fatal(err)
	}
	if r.Held == nil {
		t.Fatalf("the review of a held call says nothing of the wait: %s", req.Content)
	}
	until, err := time.Parse(time.RFC3339, r.Held.Until)
	if r.Server != "files" || r.Tool != "delete_file" || r.Via != "all" || err != nil || r.Held.Behalf != "ann@example.org" ||
		until.Before(start.Add(58*time.Second)) || until.After(time.Now().Add(time.Minute)) {
		t.Errorf("review %+v held %+v", r, r.Held)
	}
	if err := d.Resolve(ctx, escalation.Decided{ID: id, Type: req.Type, AgentID: req.AgentID, Approved: true, Content: req.Content}); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.err != nil || got.text != "files ran delete_file" {
		t.Errorf("the approved held call: %q %v", got.text, got.err)
	}
}
