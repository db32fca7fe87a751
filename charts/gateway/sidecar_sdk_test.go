package chart_test

// The sidecar example works with the official SDKs exactly as rendered: the
// agent container's environment (base URLs and the placeholder keys the
// SDKs insist on) drives openai-go and anthropic-sdk-go, against the
// gateway binary started with the gateway container's own args, on the
// configuration the chart renders, laid out as the pod mounts it.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/sacpgw/gateway/internal/roster"
)

const (
	// The sidecar agent's DEMO token (values.yaml publishes its hash).
	sidecarOwnToken = "gw-demo-copilot-2"
	// The token of a second agent the test adds to the example's config.
	otherAgentToken = "tok-reviewer-9"
)

// TestSidecarExampleWithSDKs: an agent configured exactly as the chart's
// sidecar example (OPENAI_* and ANTHROPIC_* from the rendered Deployment)
// gets its chat completions and messages, streamed and not, through the
// sidecar started with the rendered args; its own token works too; another
// agent's token is refused (401 in each SDK's error shape) and audited.
func TestSidecarExampleWithSDKs(t *testing.T) {
	helmBin(t)
	if testing.Short() {
		t.Skip("builds the gateway binary")
	}
	// Free loopback ports: the rendered args and the agent's base URLs
	// carry them, as they would carry 8080 in the pod.
	port, health := freePort(t), freePort(t)
	docs := render(t, ".", []string{"examples/sidecar-values.yaml"}, []string{
		"sidecar.port=" + port, "health.port=" + health,
		// A second known agent, whose token the sidecar must refuse.
		"config.agents.reviewer-9.token_sha256=" + roster.HashTokenHex(otherAgentToken),
	})
	agentEnv := exampleAgentEnv(t, docs)
	for _, k := range []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"} {
		if agentEnv[k] == "" {
			t.Fatalf("the example agent container sets no %s (env %v)", k, agentEnv)
		}
	}
	p := layOut(t, docs)
	startSidecar(t, p, gatewayArgs(t, docs, p), "127.0.0.1:"+health)

	// The SDKs read their environment as in the agent's container.
	for _, k := range []string{"OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_CUSTOM_HEADERS", "ANTHROPIC_PROFILE"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	for k, v := range agentEnv {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	oa := openai.NewClient()
	an := anthropic.NewClient()
	chat := openai.ChatCompletionNewParams{Model: "mock-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}
	msg := anthropic.MessageNewParams{Model: "mock-1", MaxTokens: 64, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}

	t.Run("OpenAI SDK chat", func(t *testing.T) {
		c, err := oa.Chat.Completions.New(ctx, chat)
		if err != nil || len(c.Choices) == 0 || c.Choices[0].Message.Content == "" {
			t.Fatalf("chat completion: %v %+v", err, c)
		}
	})
	t.Run("OpenAI SDK chat streamed", func(t *testing.T) {
		s := oa.Chat.Completions.NewStreaming(ctx, chat)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil || len(acc.Choices) == 0 || acc.Choices[0].Message.Content == "" {
			t.Fatalf("streamed chat completion: %v %+v", err, acc.ChatCompletion)
		}
	})
	t.Run("Anthropic SDK messages", func(t *testing.T) {
		m, err := an.Messages.New(ctx, msg)
		if err != nil || len(m.Content) == 0 || m.Content[0].Text == "" {
			t.Fatalf("message: %v %+v", err, m)
		}
	})
	t.Run("Anthropic SDK messages streamed", func(t *testing.T) {
		s := an.Messages.NewStreaming(ctx, msg)
		var m anthropic.Message
		for s.Next() {
			if err := m.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil || len(m.Content) == 0 || m.Content[0].Text == "" {
			t.Fatalf("streamed message: %v %+v", err, m)
		}
	})
	t.Run("the agent's own token", func(t *testing.T) {
		if _, err := oa.Chat.Completions.New(ctx, chat, option.WithAPIKey(sidecarOwnToken)); err != nil {
			t.Fatalf("chat with the sidecar agent's token: %v", err)
		}
	})
	t.Run("another agent's token is refused", func(t *testing.T) {
		_, err := oa.Chat.Completions.New(ctx, chat, option.WithAPIKey(otherAgentToken))
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != http.StatusUnauthorized || oe.Code != "invalid_api_key" {
			t.Errorf("OpenAI SDK with another agent's token: %v, want a 401 invalid_api_key", err)
		}
		_, err = an.Messages.New(ctx, msg, aoption.WithAPIKey(otherAgentToken))
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized || !strings.Contains(ae.RawJSON(), `"authentication_error"`) {
			t.Errorf("Anthropic SDK with another agent's token: %v, want a 401 authentication_error", err)
		}
	})

	// The trail: the served requests are the sidecar's agent's, the
	// refusals are written as auth.failure (the second from the same
	// address waits for the per-source summary, so one at least), and no
	// key is written anywhere.
	trail := readTrail(t, filepath.Join(p.root, "data", "audit"), func(es []trailEntry) bool {
		return count(es, "llm.response", "") >= 5 && count(es, "auth.failure", "") >= 1
	})
	if n := count(trail, "llm.request", "copilot-2"); n != 5 || count(trail, "llm.request", "") != n {
		t.Errorf("llm.request entries: %d of copilot-2 among %d, want 5 of 5", n, count(trail, "llm.request", ""))
	}
	if count(trail, "auth.failure", "") == 0 {
		t.Error("no auth.failure entry for another agent's token")
	}
	for _, e := range trail {
		if e.Kind == "auth.failure" && !strings.Contains(fmt.Sprint(e.Summary["reason"]), "another agent's token") {
			t.Errorf("auth.failure entry %v: want the reason to say another agent's token was sent", e.Summary)
		}
		for _, secret := range []string{otherAgentToken, sidecarOwnToken, agentEnv["OPENAI_API_KEY"]} {
			if strings.Contains(e.raw, secret) {
				t.Errorf("the trail holds the key %q: %s", secret, e.raw)
			}
		}
	}
}

// freePort is a loopback port free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// exampleAgentEnv is the environment of the example Deployment's agent
// container (its literal values).
func exampleAgentEnv(t *testing.T, docs []obj) map[string]string {
	t.Helper()
	dep := find(docs, "Deployment", fullname+"-example-agent")
	c := byName(list(dep, "spec", "template", "spec", "containers"), "agent")
	if c == nil {
		t.Fatalf("no example agent container (Deployments %v)", names(ofKind(docs, "Deployment")))
	}
	env := map[string]string{}
	for _, e := range list(c, "env") {
		if v := get(e, "value"); v != nil {
			env[str(e, "name")] = fmt.Sprint(v)
		}
	}
	return env
}

// gatewayArgs is the gateway container's args, its --config pointing at
// the pod's laid-out config directory.
func gatewayArgs(t *testing.T, docs []obj, p *pod) []string {
	t.Helper()
	_, _, c, _ := gatewayPod(docs)
	var args []string
	for _, a := range list(c, "args") {
		args = append(args, fmt.Sprint(a))
	}
	i := slices.Index(args, "--config")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("gateway args %v: no --config", args)
	}
	args[i+1] = p.config
	return args
}

// startSidecar builds the gateway, runs it with args and the pod's
// environment, and waits until its health port reports ready; the process
// is stopped at the end of the test.
func startSidecar(t *testing.T, p *pod, args []string, health string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "../../cmd/gateway")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	for k, v := range p.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("gateway %v:\n%s", args, logs.String())
			mu.Unlock()
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get("http://" + health + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-done:
			done <- err
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("gateway %v exited: %v\n%s", args, err, logs.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway not ready on %s within 90s", health)
		}
	}
}

// trailEntry is one audit entry as written, and its line.
type trailEntry struct {
	Kind    string         `json:"kind"`
	AgentID string         `json:"agent_id"`
	Summary map[string]any `json:"summary"`
	raw     string
}

// readTrail reads every entry of the audit segments under dir, again until
// ready says the entries are all there (the answer may precede its entry).
func readTrail(t *testing.T, dir string, ready func([]trailEntry) bool) []trailEntry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var out []trailEntry
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if line == "" {
					continue
				}
				var e trailEntry
				if err := json.Unmarshal([]byte(line), &e); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				e.raw = line
				out = append(out, e)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if ready(out) || time.Now().After(deadline) {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// count is the number of entries of kind (of agent, unless "").
func count(es []trailEntry, kind, agent string) int {
	n := 0
	for _, e := range es {
		if e.Kind == kind && (agent == "" || e.AgentID == agent) {
			n++
		}
	}
	return n
}
