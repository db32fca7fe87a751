package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

func TestConfigCheck(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"config", "check", "--config", "../../config"}, &out, &errb); code != exitOK {
		t.Fatalf("shipped config: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "configuration is valid") {
		t.Errorf("stdout = %q", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"config", "check", "--config", "../../internal/config/testdata/multi"}, &out, &errb); code != exitFailed {
		t.Fatalf("bad config: exit %d, want 1", code)
	}
	if !strings.Contains(errb.String(), "gateway.yaml:2: unknown key \"lisen\" (did you mean \"listen\"?)") || !strings.Contains(errb.String(), "agents.yaml:4:") {
		t.Errorf("stderr lacks file:line problems: %s", errb.String())
	}
}

// TestConfigCheckExplain: --explain prints every effective value with its
// source, after the checks and only for a valid configuration, and never
// prints a credential.
func TestConfigCheckExplain(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-explain-test-secret")
	var out, errb bytes.Buffer
	if code := run([]string{"config", "check", "--explain", "--config", "../../config"}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := []struct{ note, re string }{
		{"a value from the file", `(?m)^listen = ":8080" +# \.\./\.\./config/gateway\.yaml:\d+$`},
		{"a default", `(?m)^messaging\.workers = 4 +# default$`},
		{"a credential from the environment", `(?m)^upstreams\[1\]\.api_key = \[set\] +# env \$\{OPENAI_API_KEY:-\} at \.\./\.\./config/gateway\.yaml:\d+$`},
		{"an agent's value", `(?m)^agents\.claude-3\.rate_limit = 100/hour +# \.\./\.\./config/agents\.yaml:\d+$`},
		{"a protocol default", `(?m)^protocol\.timeouts\.approval_validity = 24h +# default$`},
		{"the verdict last", `configuration is valid: 5 agents, 2 upstreams \(\.\./\.\./config\)\n$`},
	}
	for _, l := range lines {
		if !regexp.MustCompile(l.re).MatchString(out.String()) {
			t.Errorf("%s: no line matching %s in:\n%s", l.note, l.re, out.String())
		}
	}
	if strings.Contains(out.String(), "sk-explain-test-secret") {
		t.Error("--explain printed the upstream's API key")
	}

	// Without --explain: the verdict alone.
	out.Reset()
	if code := run([]string{"config", "check", "--config", "../../config"}, &out, &errb); code != exitOK || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("without --explain: exit %d, stdout %q", code, out.String())
	}

	// A broken configuration: the problems, no explanation.
	out.Reset()
	errb.Reset()
	if code := run([]string{"config", "check", "--explain", "--config", "../../internal/config/testdata/multi"}, &out, &errb); code != exitFailed || out.Len() != 0 {
		t.Errorf("broken config: exit %d, stdout %q; want 1 and nothing", code, out.String())
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"frobnicate"}, exitUsage, "unknown command"},
		{[]string{"config"}, exitUsage, "usage: gateway config COMMAND"},
		{[]string{"config", "check", "--config", "../../config", "extra"}, exitUsage, "unexpected argument"},
		{[]string{"serve", "--nope"}, exitUsage, "flag provided but not defined"},
		{[]string{"serve", "--config", "../../internal/config/testdata/multi"}, exitUsage, "problem(s)"},
		{[]string{"serve", "--config", "../../config", "--sidecar-agent", "claude-3", "--listen", ":0"}, exitUsage, "loopback"},
		{[]string{"serve", "--config", "../../config", "--sidecar-agent", "nobody", "--listen", "127.0.0.1:0"}, exitUsage, "no such agent"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		if code := run(tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"version"}, &out, io.Discard); code != 0 || !strings.HasPrefix(out.String(), "gateway dev commit ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("version: %d %q", code, out.String())
	}
}

// TestSIGTERMDrainsInFlight runs the real binary: a request in flight when
// SIGTERM arrives still gets its full answer, and the process exits 0.
func TestSIGTERMDrainsInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "gateway")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	started := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		time.Sleep(700 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"drained"},"finish_reason":"stop"}]}`)
	}))
	defer up.Close()
	dir := t.TempDir()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	files := map[string]string{
		config.GatewayFile:  "listen: " + addr + "\nlog: {level: info}\nupstreams:\n  - {name: up, type: openai, base_url: " + up.URL + "/v1, models: ['*']}\naudit: {dir: " + dir + "/audit}\n",
		config.AgentsFile:   "agents:\n  a1:\n    token_sha256: \"" + roster.HashTokenHex("tok") + "\"\n",
		config.ProtocolFile: "protocol: {}\n",
	}
	for name, c := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "serve", "--config", dir)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := bufio.NewScanner(stderr)
	for logs.Scan() && !strings.Contains(logs.Text(), "gateway listening") {
	}
	go func() {
		for logs.Scan() {
		}
	}()
	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{status: resp.StatusCode, body: string(b)}
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("request never reached the upstream")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.status != 200 || !strings.Contains(r.body, "drained") {
		t.Fatalf("in-flight request: %+v", r)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v, want 0", err)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("still accepting connections after shutdown")
	}
}
