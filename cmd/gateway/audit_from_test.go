package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/audit/ship"
)

// shipChain writes n entries to chain in a directory of its own and ships
// it; closed (a clean shutdown) or not (a pod gone: only the segments it
// had closed are in the bucket).
func shipChain(t *testing.T, cfg ship.Config, chain, key string, n int, closed bool) {
	t.Helper()
	dir := t.TempDir()
	l, err := audit.Open(audit.Config{Dir: dir, Chain: chain, SigningKeyFile: key, SegmentMaxBytes: 1500,
		CheckpointEvery: 5, CheckpointInterval: -1, CommitDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ship.New(cfg, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := l.Append(context.Background(), audit.Record{Kind: audit.KindLLMRequest, AgentID: chain, Summary: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
		if i == 9 && !closed {
			if err := s.Pass(context.Background(), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !closed {
		if err := s.Pass(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Final(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// verify --from and export --from over a fleet in a bucket: two replicas
// and a sidecar that disappeared verify together (the sidecar named as
// stopped without a final checkpoint), the merged export's manifest
// verifies, and a segment deleted from the bucket is named.
func TestAuditFromBucket(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("trail"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv("AWS_ENDPOINT_URL", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	if err := audit.Keygen("sign.key", "sign.pub"); err != nil {
		t.Fatal(err)
	}
	cfg := ship.Config{URL: "s3://trail/fleet", Endpoint: srv.URL, AccessKeyID: "test", SecretAccessKey: "test-secret", PathStyle: true}
	cfg.Validate()
	shipChain(t, cfg, "gateway-0", "sign.key", 17, true)
	shipChain(t, cfg, "gateway-1", "sign.key", 11, true)
	shipChain(t, cfg, "agent-x-sidecar", "sign.key", 18, false)

	var out, errb bytes.Buffer
	if code := run([]string{"audit", "verify", "--from", "s3://trail/fleet", "--pubkey", "sign.pub"}, &out, &errb); code != exitOK {
		t.Fatalf("verify --from: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.HasPrefix(out.String(), "ok: 3 chains") || !strings.Contains(out.String(), "note: chain agent-x-sidecar stopped without a final checkpoint") {
		t.Fatalf("verify --from said:\n%s", out.String())
	}

	out.Reset()
	errb.Reset()
	if code := run([]string{"audit", "export", "--from", "s3://trail/fleet", "--pubkey", "sign.pub", "--format", "jsonl", "--out", "all.jsonl"}, &out, &errb); code != exitOK {
		t.Fatalf("export --from: exit %d\n%s%s", code, out.String(), errb.String())
	}
	data, err := os.ReadFile("all.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var prev time.Time
	chains := map[string]bool{}
	for _, line := range lines {
		var e struct {
			Chain string    `json:"chain"`
			TS    time.Time `json:"ts"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e.TS.Before(prev) {
			t.Fatalf("export not merged by time: %s after %s", e.TS, prev)
		}
		prev = e.TS
		chains[e.Chain] = true
	}
	if len(chains) != 3 || len(lines) < 17+11 {
		t.Fatalf("export has %d entries of %d chains", len(lines), len(chains))
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"audit", "verify", "--export", "all.jsonl", "--pubkey", "sign.pub"}, &out, &errb); code != exitOK {
		t.Fatalf("the merged export does not verify: exit %d\n%s%s", code, out.String(), errb.String())
	}

	var victim string
	for name := range backendKeys(t, backend, "fleet/gateway-1/") {
		if strings.HasSuffix(name, "00000000000000000001.jsonl") {
			continue
		}
		if strings.HasSuffix(name, ".jsonl") && !strings.Contains(name, "checkpoints") && (victim == "" || name < victim) {
			victim = name
		}
	}
	if _, err := backend.DeleteObject("trail", victim); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	code := run([]string{"audit", "verify", "--from", "s3://trail/fleet", "--pubkey", "sign.pub"}, &out, &errb)
	if code != exitFailed || !strings.Contains(errb.String(), filepath.Base(victim)) {
		t.Fatalf("a deleted segment: exit %d, stderr %s; want 1 naming %s", code, errb.String(), filepath.Base(victim))
	}

	errb.Reset()
	if code := run([]string{"audit", "verify", "--from", "s3://trail/fleet", "--dir", "x"}, &out, &errb); code != exitUsage {
		t.Fatalf("--from with --dir: exit %d", code)
	}
}

func backendKeys(t *testing.T, b *s3mem.Backend, prefix string) map[string]bool {
	t.Helper()
	list, err := b.ListBucket("trail", &gofakes3.Prefix{HasPrefix: true, Prefix: prefix}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, c := range list.Contents {
		out[c.Key] = true
	}
	return out
}
