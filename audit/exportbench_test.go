package audit

import (
	"bufio"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// syntheticChain writes n entries of chain gw-test to dir byte for byte as
// the writer lays them out (segments of at most 64 MiB, a signed checkpoint
// every cpEvery entries), entry i at base + i ms. Without the writer's
// fsyncs it takes seconds, not minutes, for the entries a benchmark of a
// long trail needs.
func syntheticChain(tb testing.TB, dir string, n, cpEvery int, key ed25519.PrivateKey, base time.Time) {
	tb.Helper()
	chain := "gw-test"
	cps, err := os.Create(filepath.Join(dir, checkpointName(chain)))
	if err != nil {
		tb.Fatal(err)
	}
	var seg *os.File
	var w *bufio.Writer
	var size int64
	closeSeg := func() {
		if seg != nil {
			if err := w.Flush(); err != nil {
				tb.Fatal(err)
			}
			_ = seg.Close()
		}
	}
	prev, line := GenesisHash, []byte(nil)
	for i := 1; i <= n; i++ {
		p, err := prepare(appendCanonicalString(nil, chain), rec(i))
		if err != nil {
			tb.Fatal(err)
		}
		ts := base.Add(time.Duration(i) * time.Millisecond)
		line, prev = p.appendLine(line[:0], int64(i), prev, ts)
		if seg == nil || size+int64(len(line)) > defaultSegmentMaxBytes {
			closeSeg()
			if seg, err = os.Create(filepath.Join(dir, segmentName(chain, int64(i)))); err != nil {
				tb.Fatal(err)
			}
			w, size = bufio.NewWriterSize(seg, 1<<20), 0
		}
		_, _ = w.Write(line)
		size += int64(len(line))
		if i%cpEvery == 0 || i == n {
			cp := signCheckpoint(Checkpoint{Chain: chain, Seq: int64(i), Hash: prev, TS: ts.UTC().Format(tsLayout)}, key)
			if _, err := cps.Write(cp.line()); err != nil {
				tb.Fatal(err)
			}
		}
	}
	closeSeg()
	if err := cps.Close(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkExportSince exports the last 3,600 entries (an hour at one a
// second) of a 100,000-entry trail: verified from seq 1 (no key: how every
// export verified before) and from the last signed checkpoint before the
// window (with the key). entries-verified is what each read and checked.
func BenchmarkExportSince(b *testing.B) {
	const n, window = 100_000, 3_600
	dir := b.TempDir()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	syntheticChain(b, dir, n, 1000, priv, base)
	since := base.Add(time.Duration(n-window+1) * time.Millisecond)
	out := filepath.Join(b.TempDir(), "window.jsonl")
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"from-seq-1", Options{}},
		{"from-checkpoint", Options{Keys: []ed25519.PublicKey{pub}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var m Manifest
			for b.Loop() {
				if m, err = Export(dir, Filter{Since: since}, "jsonl", out, tc.o); err != nil {
					b.Fatal(err)
				}
			}
			if m.Count != window {
				b.Fatalf("exported %d entries, want %d", m.Count, window)
			}
			b.ReportMetric(float64(m.Chains[0].EntriesVerified), "entries-verified")
		})
	}
}
