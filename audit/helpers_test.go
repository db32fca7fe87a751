package audit

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openLog opens a chain in dir with test defaults, closing it at cleanup.
func openLog(t testing.TB, cfg Config) *Log {
	t.Helper()
	if cfg.Chain == "" {
		cfg.Chain = "gw-test"
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	l, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func rec(i int) Record {
	return Record{
		Kind: KindLLMRequest, AgentID: []string{"agent-a", "agent-b"}[i%2],
		SessionID: "s1", RequestID: "req-" + string(rune('a'+i%26)),
		Object: Members("model", "mock-1", "i", i, "tokens", map[string]any{"total": i * 10}),
	}
}

// appendN appends n records and returns the entries.
func appendN(t testing.TB, l *Log, n int) []Entry {
	t.Helper()
	out := make([]Entry, 0, n)
	for i := 0; i < n; i++ {
		e, err := l.Append(context.Background(), rec(i))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		out = append(out, e)
	}
	return out
}

// segments lists the chain's segment paths in order.
func segments(t testing.TB, dir, chain string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, chain+"-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// allLines returns every line of a chain's segments, in order, without newlines.
func allLines(t testing.TB, dir, chain string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range segments(t, dir, chain) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.SplitAfter(data, []byte("\n")) {
			if len(l) > 0 {
				out = append(out, bytes.TrimSuffix(l, []byte("\n")))
			}
		}
	}
	return out
}

func mustVerify(t testing.TB, dir string) Report {
	t.Helper()
	rep, err := Verify(dir, nil)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rep
}

// objectOf is the summary of m's members, each added with Any: what a
// map-built summary of the same members was written as.
func objectOf(m map[string]any) *Object {
	o := &Object{}
	for k, v := range m {
		o.Any(k, v)
	}
	return o
}
