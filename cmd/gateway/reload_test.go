package main

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// TestConfigHotReload runs the real binary: a new agent in agents.yaml can
// call without a restart; a broken agents.yaml keeps the last good config
// serving and the log says why.
func TestConfigHotReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "gateway")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	agent := func(id string) string {
		return "  " + id + ":\n    token_sha256: \"" + roster.HashTokenHex("tok-"+id) + "\"\n"
	}
	write := func(name, content string) {
		// Write-and-rename, as editors and ConfigMap updates do.
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write(config.GatewayFile, "listen: "+addr+"\nupstreams:\n  - {name: mock, type: mock, models: ['*']}\naudit: {dir: "+dir+"/audit}\n")
	write(config.AgentsFile, "agents:\n"+agent("a1"))
	write(config.ProtocolFile, "protocol: {}\n")
	cmd := exec.Command(bin, "serve", "--config", dir)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var mu sync.Mutex
	var logs strings.Builder
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.Contains(sc.Text(), "gateway listening") {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("gateway did not start")
	}
	status := func(token string) int {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(`{"model":"mock-1","messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor := func(what string, ok func() bool) {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if ok() {
				return
			}
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%s: timed out\n%s", what, logs.String())
	}
	if status("tok-a2") != 401 || status("tok-a1") != 200 {
		t.Fatal("unexpected initial state")
	}
	write(config.AgentsFile, "agents:\n"+agent("a1")+agent("a2"))
	waitFor("new agent admitted without restart", func() bool { return status("tok-a2") == 200 })
	write(config.AgentsFile, "agents:\n  a1:\n    token_sha256: nope\n")
	waitFor("broken config reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), "config reload failed") && strings.Contains(logs.String(), "token_sha256")
	})
	if status("tok-a1") != 200 || status("tok-a2") != 200 {
		t.Fatal("a broken config replaced the last good one")
	}
}
