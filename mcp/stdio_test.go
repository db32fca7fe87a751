package mcp

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
)

// stdioServerEnv, set, makes the test binary an MCP server on stdio
// built with the official Go SDK: the program a stdio server entry runs.
const stdioServerEnv = "GATEWAY_TEST_STDIO_MCP"

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) != "" {
		runStdioServer()
		return
	}
	os.Exit(m.Run())
}

type stdioArgs struct {
	Text string `json:"text"`
}

// runStdioServer serves tools "echo" (its text, and the secret its
// environment holds when asked for "secret"), "pid" (its process id) and
// "grow" (allocates 3GB) on stdin and stdout, and says hello on stderr.
func runStdioServer() {
	s := sdk.NewServer(&sdk.Implementation{Name: "stdio-test", Version: "1"}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes."}, func(_ context.Context, _ *sdk.CallToolRequest, in stdioArgs) (*sdk.CallToolResult, any, error) {
		if in.Text == "secret" {
			return text("secret=" + os.Getenv("TEST_SECRET") + " gateway=" + os.Getenv("GATEWAY_ONLY")), nil, nil
		}
		return text(in.Text), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "pid", Description: "Its process id."}, func(context.Context, *sdk.CallToolRequest, stdioArgs) (*sdk.CallToolResult, any, error) {
		return text(strconv.Itoa(os.Getpid())), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "grow", Description: "Allocates 3GB."}, func(context.Context, *sdk.CallToolRequest, stdioArgs) (*sdk.CallToolResult, any, error) {
		// Untouched, the pages cost no memory where no bound holds.
		b := make([]byte, 3<<30)
		b[0] = 1
		return text(strconv.Itoa(len(b))), nil, nil
	})
	os.Stderr.WriteString("stdio test server ready\n")
	_ = s.Run(context.Background(), &sdk.StdioTransport{})
}

// stdioGateway serves a door whose server "local" is this test binary run
// as a stdio server, to agent a1 (every tool allowed), and returns its
// URL, the door and its log.
func stdioGateway(t *testing.T, mutate func(*config.MCPServer)) (string, *Door, *testkit.LogBuffer) {
	t.Helper()
	t.Setenv(stdioServerEnv, "") // the door's child gets it from env alone
	t.Setenv("GATEWAY_ONLY", "leaked")
	sc := config.MCPServer{Name: "local", Command: stdioCommand(t), Timeout: config.Duration(10 * time.Second),
		Env: config.Env{stdioServerEnv: "1", "TEST_SECRET": "s3"}, MaxMemory: 4 << 30}
	if mutate != nil {
		mutate(&sc)
	}
	agent := &roster.Agent{ID: "a1", MaxRequestSize: 1 << 20, MCPTools: map[string][]string{"local": {"*"}}}
	cfg := &config.Config{Agents: map[string]*roster.Agent{"a1": agent}}
	cfg.Gateway.MCP.Servers = []config.MCPServer{sc}
	logs := &testkit.LogBuffer{}
	d, err := New(Deps{Config: cfg, Policy: fakePolicy{policy.MCPDecision{Decision: "allow"}}, Limiter: limit.NewMemory(),
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return serveAgent(t, d, agent) + "/mcp/local", d, logs
}

// stdioCommand is the command running this test binary as a stdio server.
func stdioCommand(t *testing.T) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, "-test.run=^$"}
}

// serveAgent serves d to agent, as the identify stage leaves a request,
// and returns the base URL.
func serveAgent(t *testing.T, d *Door, agent *roster.Agent) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = scope.Attach(r, &scope.Exchange{RequestID: "req-1", Agent: agent})
		r.SetPathValue("server", strings.TrimPrefix(r.URL.Path, "/mcp/"))
		d.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func sdkConnect(t *testing.T, ctx context.Context, endpoint string) *sdk.ClientSession {
	t.Helper()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callText(t *testing.T, ctx context.Context, cs *sdk.ClientSession, tool, arg string) (string, error) {
	t.Helper()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: map[string]any{"text": arg}})
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			out.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return out.String(), &sdkToolError{out.String()}
	}
	return out.String(), nil
}

type sdkToolError struct{ text string }

func (e *sdkToolError) Error() string { return "tool error: " + e.text }

// TestStdioServerKilledMidSession: a stdio server built with the Go SDK
// answers the SDK client through the gateway, with the environment the
// configuration gives it and nothing else of the gateway's, its stderr in
// the log; killed mid-session, the agent's next call in that session
// fails, and once it initializes again its call succeeds on a new process.
func TestStdioServerKilledMidSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	endpoint, _, logs := stdioGateway(t, nil)
	cs := sdkConnect(t, ctx, endpoint)
	if got, err := callText(t, ctx, cs, "echo", "hello"); err != nil || got != "hello" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	if got, err := callText(t, ctx, cs, "echo", "secret"); err != nil || got != "secret=s3 gateway=" {
		t.Errorf("the server's environment = %q, %v; want its configured secret and none of the gateway's", got, err)
	}
	pidText, err := callText(t, ctx, cs, "pid", "")
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(pidText)
	if pid <= 0 || pid == os.Getpid() {
		t.Fatalf("pid = %q", pidText)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := callText(t, ctx, cs, "echo", "after"); err == nil {
		t.Fatal("a call in the dead process's session succeeded")
	}
	cs2 := sdkConnect(t, ctx, endpoint)
	if got, err := callText(t, ctx, cs2, "echo", "again"); err != nil || got != "again" {
		t.Fatalf("after initializing again: %q, %v", got, err)
	}
	if pid2, _ := callText(t, ctx, cs2, "pid", ""); pid2 == pidText {
		t.Errorf("the new session runs on the killed process %s", pid2)
	}
	out := logs.String()
	for _, want := range []string{"stdio test server ready", "mcp: stdio server ended"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3") {
		t.Errorf("the log holds the server's secret:\n%s", out)
	}
}

// TestStdioServerMemoryBound: a process past its max_memory fails to
// allocate (and dies), the agent's call fails, and the gateway goes on.
func TestStdioServerMemoryBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	endpoint, _, logs := stdioGateway(t, func(sc *config.MCPServer) { sc.MaxMemory = 2 << 30 })
	cs := sdkConnect(t, ctx, endpoint)
	if got, err := callText(t, ctx, cs, "grow", ""); err == nil {
		t.Fatalf("a 3GB allocation under a 2GB bound succeeded: %q", got)
	}
	cs2, err := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil).
		Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs)
	}
	defer cs2.Close()
	if got, err := callText(t, ctx, cs2, "echo", "still here"); err != nil || got != "still here" {
		t.Fatalf("after the bound: %q, %v\n%s", got, err, logs)
	}
}

// TestStdioBackoff: the first early exit restarts at once, the next ones
// wait longer, bounded.
func TestStdioBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 0, 2: time.Second, 3: 2 * time.Second, 4: 4 * time.Second, 20: maxBackoff} {
		if got := backoff(n); got != want {
			t.Errorf("backoff(%d) = %s, want %s", n, got, want)
		}
	}
}
