package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// builtGateway is the command built once for the tests that run it as a
// user does, from folders of their own.
var builtGateway struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtGateway.dir != "" {
		_ = os.RemoveAll(builtGateway.dir)
	}
	os.Exit(code)
}

func gatewayBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	b := &builtGateway
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "gateway-cli-"); b.err != nil {
			return
		}
		b.bin = filepath.Join(b.dir, "gateway")
		if out, err := exec.Command("go", "build", "-o", b.bin, ".").CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// cli runs the built gateway in dir with only the environment given (and
// PATH), so neither the developer's home nor $GATEWAY_CONFIG leaks in.
type cli struct {
	t   *testing.T
	bin string
	dir string
	env []string
}

func newCLI(t *testing.T) *cli {
	home := t.TempDir()
	return &cli{t: t, bin: gatewayBin(t), dir: t.TempDir(),
		env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}}
}

func (c *cli) run(args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		c.t.Fatalf("gateway %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

func noSystemConfig(t *testing.T) {
	if _, err := os.Stat(filepath.Join(systemConfigDir, config.GatewayFile)); err == nil {
		t.Skipf("%s holds a configuration on this machine", systemConfigDir)
	}
}

// A gateway started where there is no configuration says, in one line,
// where it looked and how to get one, and exits 2; so do the commands that
// need one.
func TestNoConfigSaysHowToGetOne(t *testing.T) {
	noSystemConfig(t)
	c := newCLI(t)
	for _, args := range [][]string{nil, {"serve"}, {"config", "check"}, {"workflow", "graph", "x"}} {
		code, out, errb := c.run(args...)
		if code != exitUsage || out != "" || strings.Count(errb, "\n") != 1 ||
			!strings.Contains(errb, "no configuration found (looked in config, ") || !strings.Contains(errb, "gateway init") || !strings.Contains(errb, "--config DIR") {
			t.Errorf("gateway %v: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, out, errb)
		}
	}
	// A wrong flag is still a flag error, not a missing configuration.
	if code, _, errb := c.run("serve", "--nope"); code != exitUsage || !strings.Contains(errb, "flag provided but not defined") {
		t.Errorf("serve --nope: %d %q", code, errb)
	}
	// An empty ./config is not a configuration: it is passed over.
	if err := os.Mkdir(filepath.Join(c.dir, "config"), 0o700); err != nil {
		t.Fatal(err)
	}
	if code, _, errb := c.run("config", "check"); code != exitUsage || !strings.Contains(errb, "no configuration found") {
		t.Errorf("with an empty ./config: %d %q", code, errb)
	}
}

// gateway init writes a configuration that checks and serves: its fresh
// tokens work, the published demo tokens do not, and a second init over it
// is refused without touching it.
func TestInitWritesAWorkingConfig(t *testing.T) {
	c := newCLI(t)
	code, out, errb := c.run("init", "gw")
	if code != exitOK {
		t.Fatalf("init: exit %d: %s", code, errb)
	}
	tokens := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^  (agent \S+|admin|reviewer \S+) +(gw-[A-Za-z0-9_-]{43})$`).FindAllStringSubmatch(out, -1) {
		tokens[m[1]] = m[2]
	}
	for _, who := range []string{"agent claude-3", "agent copilot-2", "agent gemini-pro", "admin", "reviewer security-lead"} {
		if tokens[who] == "" {
			t.Errorf("init printed no token for %s:\n%s", who, out)
		}
	}
	dir := filepath.Join(c.dir, "gw")
	written := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		written[filepath.ToSlash(rel)] = true
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, tok := range tokens {
			if bytes.Contains(b, []byte(tok)) {
				t.Errorf("%s holds a token in clear", rel)
			}
		}
		if bytes.Contains(b, []byte("gw-demo-")) {
			t.Errorf("%s still names a demo token", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"gateway.yaml", "agents.yaml", "protocol.yaml", "registry.yaml", "workflows.yaml", "rbac_model.conf",
		"schemas/claude-3.json", "specs/arch-001.md", "rego/gateway/chat/chat.rego", "rego/gateway/chat/chat_test.rego"} {
		if !written[f] {
			t.Errorf("init did not write %s", f)
		}
	}
	agents, _ := os.ReadFile(filepath.Join(dir, config.AgentsFile))
	if !bytes.Contains(agents, []byte(roster.HashTokenHex(tokens["agent copilot-2"]))) {
		t.Error("agents.yaml does not hold the sha256 of copilot-2's printed token")
	}

	if code, out, errb := c.run("config", "check", "--config", "gw"); code != exitOK || !strings.Contains(out, "configuration is valid") {
		t.Fatalf("config check on the written config: %d %q %q", code, out, errb)
	}
	if code, out, errb := c.run("policy", "test", "--config", "gw"); code != exitOK || !strings.Contains(out, " 0 failed") {
		t.Errorf("policy test on the written policies: %d %s %s", code, lastLine(out), errb)
	}

	// A second init refuses, and leaves the first one as it was.
	code, _, errb = c.run("init", "gw")
	if code != exitFailed || !strings.Contains(errb, "not empty") {
		t.Errorf("init over a config: exit %d %q; want 1 and a refusal", code, errb)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, config.AgentsFile)); !bytes.Equal(again, agents) {
		t.Error("the refused init changed agents.yaml")
	}

	// Served from another folder, found through GATEWAY_CONFIG.
	c.env = append(c.env, "GATEWAY_CONFIG="+dir)
	c.dir = t.TempDir()
	addr := serveCLI(t, c)
	if resp, err := http.Get("http://" + addr + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	chat := func(token string) int {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(`{"model":"mock-1","messages":[{"role":"user","content":"hello"}]}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := chat(tokens["agent copilot-2"]); got != 200 {
		t.Errorf("chat with the fresh token: %d, want 200", got)
	}
	if got := chat("gw-demo-copilot-2"); got != 401 {
		t.Errorf("chat with the published demo token: %d, want 401", got)
	}
	// The address in a browser: the front page, and /review leads to the queue.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for path, want := range map[string]int{"/": 200, "/review": http.StatusSeeOther} {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Accept", "text/html")
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == 200 && !strings.Contains(string(b), `href="/review/queue"`)) {
			t.Errorf("GET %s: %d %q", path, resp.StatusCode, b)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// serveCLI starts c's gateway on a free loopback port, stopped at the
// end of the test; it returns the address once the gateway listens.
func serveCLI(t *testing.T, c *cli, extra ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(c.bin, append([]string{"serve", "--listen", addr}, extra...)...)
	cmd.Dir, cmd.Env = c.dir, c.env
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	logs := bufio.NewScanner(stderr)
	listening := make(chan bool, 1)
	go func() {
		found := false
		for logs.Scan() {
			if !found && strings.Contains(logs.Text(), "gateway listening") {
				found = true
				listening <- true
			}
		}
		if !found {
			listening <- false
		}
	}()
	select {
	case ok := <-listening:
		if !ok {
			t.Fatal("the gateway exited before it listened")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not listen within 30s")
	}
	return addr
}

// GATEWAY_CONFIG and the user's configuration folder are found from any
// folder; a GATEWAY_CONFIG naming nothing is one line.
func TestConfigSearch(t *testing.T) {
	noSystemConfig(t)
	c := newCLI(t)
	if code, _, errb := c.run("init", filepath.Join(c.dir, "home-config")); code != exitOK {
		t.Fatal(errb)
	}
	user := filepath.Join(strings.TrimPrefix(c.env[2], "XDG_CONFIG_HOME="), "gateway")
	if err := os.MkdirAll(filepath.Dir(user), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(c.dir, "home-config"), user); err != nil {
		t.Fatal(err)
	}
	if code, out, errb := c.run("config", "check"); code != exitOK || !strings.Contains(out, "("+user+")") {
		t.Errorf("the user's config folder: %d %q %q", code, out, errb)
	}
	c.env = append(c.env, "GATEWAY_CONFIG="+filepath.Join(c.dir, "missing"))
	if code, _, errb := c.run("config", "check"); code != exitUsage || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, "GATEWAY_CONFIG="+filepath.Join(c.dir, "missing")+": no such directory") {
		t.Errorf("a GATEWAY_CONFIG naming nothing: %d %q", code, errb)
	}
}

// The search order, without touching /etc: $GATEWAY_CONFIG, ./config, the
// user's folder, the system folder; a folder without gateway.yaml is
// passed over.
func TestConfigSearchOrder(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	mk := func(d string) string {
		p := filepath.Join(root, d)
		writeConfigDir(t, p, "")
		return p
	}
	env := map[string]string{}
	s := configSearch{getenv: func(k string) string { return env[k] }, userDir: func() (string, error) { return filepath.Join(root, "user"), nil }, system: filepath.Join(root, "etc")}
	find := func() string {
		d, err := s.find()
		if err != nil {
			return err.Error()
		}
		return d
	}
	if got := find(); !strings.HasPrefix(got, "no configuration found (looked in config, "+filepath.Join(root, "user", "gateway")+", "+filepath.Join(root, "etc")+"; GATEWAY_CONFIG is not set)") {
		t.Errorf("nothing anywhere: %q", got)
	}
	etc := mk("etc")
	if got := find(); got != etc {
		t.Errorf("system only: %q", got)
	}
	user := mk("user/gateway")
	if got := find(); got != user {
		t.Errorf("user over system: %q", got)
	}
	if err := os.Mkdir(filepath.Join(root, "config"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := find(); got != user {
		t.Errorf("an empty ./config was not passed over: %q", got)
	}
	mk("config")
	if got := find(); got != "config" {
		t.Errorf("./config over user: %q", got)
	}
	env[configEnv] = etc
	if got := find(); got != etc {
		t.Errorf("GATEWAY_CONFIG over ./config: %q", got)
	}
}

// Every command's --help (and gateway help COMMAND) exits 0 and describes
// the command and each of its flags in one line; gateway --help lists
// every command with its one-line description.
func TestEveryCommandHasHelp(t *testing.T) {
	c := newCLI(t)
	code, top, errb := c.run("--help")
	if code != exitOK || errb != "" {
		t.Fatalf("--help: %d %q", code, errb)
	}
	for _, cmd := range commands() {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(cmd.path) + ` +\S.*$`).MatchString(top) {
			t.Errorf("--help lacks %q with its description:\n%s", cmd.path, top)
		}
		for _, args := range [][]string{append(strings.Fields(cmd.path), "--help"), append(strings.Fields(cmd.path), "-h"), append([]string{"help"}, strings.Fields(cmd.path)...)} {
			code, out, errb := c.run(args...)
			if code != exitOK || !strings.HasPrefix(out, "usage: gateway "+cmd.path) || !strings.Contains(out, cmd.summary) {
				t.Errorf("gateway %v: exit %d, stdout %q, stderr %q", args, code, out, errb)
			}
		}
		for _, f := range flagsOf(cmd) {
			if f.summary == "" {
				t.Errorf("%s: flag -%s has no description", cmd.path, f.name)
			}
		}
	}
	if code, out, _ := c.run("audit", "--help"); code != exitOK || !strings.Contains(out, "audit verify") {
		t.Errorf("audit --help: %d %q", code, out)
	}
}

// The completion scripts print for each shell and complete from the
// command table: bash parses its script and, sourced, completes commands,
// subcommands, flags and fixed arguments.
func TestCompletion(t *testing.T) {
	c := newCLI(t)
	scripts := map[string]string{}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errb := c.run("completion", sh)
		if code != exitOK || !strings.Contains(out, "gateway") {
			t.Fatalf("completion %s: %d %q", sh, code, errb)
		}
		scripts[sh] = out
		if _, err := exec.LookPath(sh); err == nil {
			if out, err := exec.Command(sh, "-n", "-c", out).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", sh, err, out)
			}
		}
	}
	if code, _, _ := c.run("completion", "powershell"); code != exitUsage {
		t.Errorf("completion powershell: exit %d, want 2", code)
	}
	for _, cmd := range commands() {
		for _, sh := range []string{"bash", "fish"} {
			if !strings.Contains(scripts[sh], strings.Fields(cmd.path)[len(strings.Fields(cmd.path))-1]) {
				t.Errorf("%s completion lacks %q", sh, cmd.path)
			}
		}
		for _, f := range flagsOf(cmd) {
			if !strings.Contains(scripts["bash"], "--"+f.name) || !strings.Contains(scripts["fish"], "-l "+f.name) {
				t.Errorf("completion lacks %s's flag %s", cmd.path, f.name)
			}
		}
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	complete := func(words ...string) string {
		script := scripts["bash"] + fmt.Sprintf("\nCOMP_WORDS=(%s); COMP_CWORD=%d; _gateway; echo \"${COMPREPLY[*]}\"\n", strings.Join(words, " "), len(words)-1)
		out, err := exec.Command("bash", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	cases := []struct {
		words []string
		want  string
	}{
		{[]string{"gateway", "au"}, "audit"},
		{[]string{"gateway", "audit", "v"}, "verify verify-proof"},
		{[]string{"gateway", "serve", "--l"}, "--listen"},
		{[]string{"gateway", "config", "check", "--e"}, "--explain"},
		{[]string{"gateway", "completion", "f"}, "fish"},
		{[]string{"gateway", "serve", "--config", "''"}, ""}, // a value: left to file names
		{[]string{"gateway", "i"}, "init"},
	}
	for _, tc := range cases {
		if got := complete(tc.words...); got != tc.want {
			t.Errorf("complete %v = %q, want %q", tc.words, got, tc.want)
		}
	}
}

// A second gateway on the first one's audit chain says which setting to
// change; neither it nor a start whose port is taken leaves a chain (a
// file or an entry) behind.
func TestStartsThatDoNotServe(t *testing.T) {
	c := newCLI(t)
	cfg := filepath.Join(c.dir, "cfg")
	writeConfigDir(t, cfg, "audit: {dir: trail, chain: c1}\n")
	trail := filepath.Join(cfg, "trail")

	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	code, _, errb := c.run("serve", "--config", "cfg", "--listen", held.Addr().String())
	if code != exitUsage || !strings.Contains(errb, "listen "+held.Addr().String()) {
		t.Fatalf("port taken: exit %d %q", code, errb)
	}
	if _, err := os.Stat(trail); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a start on a taken port left %s behind (%v)", trail, err)
	}
	other := filepath.Join(c.dir, "cfg-health")
	writeConfigDir(t, other, "audit: {dir: trail, chain: c1}\nhealth_listen: "+held.Addr().String()+"\n")
	if code, _, errb := c.run("serve", "--config", "cfg-health", "--listen", "127.0.0.1:0"); code != exitUsage || !strings.Contains(errb, "health_listen") {
		t.Errorf("health port taken: exit %d %q", code, errb)
	}
	if _, err := os.Stat(filepath.Join(other, "trail")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a start on a taken health port left a trail behind (%v)", err)
	}

	serveCLI(t, c, "--config", "cfg")
	before := chainFiles(t, trail)
	code, _, errb = c.run("serve", "--config", "cfg", "--listen", "127.0.0.1:0")
	if code != exitUsage || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, `audit.chain "c1"`) ||
		!strings.Contains(errb, "another gateway is writing this chain") || !strings.Contains(errb, "its own audit.chain") {
		t.Errorf("second gateway on the chain: exit %d %q", code, errb)
	}
	if after := chainFiles(t, trail); !slices.Equal(before, after) {
		t.Errorf("the refused gateway changed the trail: %v -> %v", before, after)
	}
}

// chainFiles lists the trail's files with their sizes.
func chainFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%d", e.Name(), fi.Size()))
	}
	return out
}
