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

// shipVanished writes n entries to chain and ships it as a pod that
// disappeared would have: periodic passes only (the segments it had
// closed, the checkpoints they cover), no last pass.
func shipVanished(t *testing.T, cfg ship.Config, chain, key string, n int) {
	t.Helper()
	dir := t.TempDir()
	l, err := audit.Open(audit.Config{Dir: dir, Chain: chain, SigningKeyFile: key, SegmentMaxBytes: 1500,
		CheckpointEvery: 5, CheckpointInterval: -1, CommitDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	s, err := ship.New(cfg, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := l.Append(context.Background(), audit.Record{Kind: audit.KindLLMRequest, AgentID: chain, Object: audit.Members("i", i)}); err != nil {
			t.Fatal(err)
		}
		if i == 9 || i == n-1 {
			if err := s.Pass(context.Background(), false); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// shipReplicas writes n entries to each chain in turn (replicas serving
// at the same time), stops them cleanly and ships them.
func shipReplicas(t *testing.T, cfg ship.Config, key string, n int, chains ...string) {
	t.Helper()
	dirs := make([]string, len(chains))
	logs := make([]*audit.Log, len(chains))
	for i, chain := range chains {
		dirs[i] = t.TempDir()
		l, err := audit.Open(audit.Config{Dir: dirs[i], Chain: chain, SigningKeyFile: key, SegmentMaxBytes: 1500,
			CheckpointEvery: 5, CheckpointInterval: -1, CommitDelay: -1})
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}
	for j := range n {
		for i, l := range logs {
			if _, err := l.Append(context.Background(), audit.Record{Kind: audit.KindLLMRequest, AgentID: chains[i], Object: audit.Members("i", j)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := ship.New(cfg, dirs[i], nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Final(context.Background()); err != nil {
			t.Fatal(err)
		}
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
	shipReplicas(t, cfg, "sign.key", 14, "gateway-0", "gateway-1")
	shipVanished(t, cfg, "agent-x-sidecar", "sign.key", 18)

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
	switches, last := 0, "" // replicas written in turn: merged by time, they alternate
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
		if e.Chain != last && e.Chain != "agent-x-sidecar" && last != "agent-x-sidecar" {
			switches++
		}
		last = e.Chain
	}
	if len(chains) != 3 || len(lines) < 2*14 || switches < 2*14-1 {
		t.Fatalf("export has %d entries of %d chains, the replicas alternating %d times", len(lines), len(chains), switches)
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
