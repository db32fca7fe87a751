package audit

import (
	"testing"
	"time"
)

// BenchmarkEntryCPU is the writer's own work per entry, without the disk:
// encoding the line, and encoding it and adding it to the Merkle tree (its
// leaf hash and the compact range's amortized one node hash). The
// difference is what the tree costs each append.
func BenchmarkEntryCPU(b *testing.B) {
	p, err := prepare(appendCanonicalString(nil, "gw-bench"), rec(3))
	if err != nil {
		b.Fatal(err)
	}
	ts := time.Unix(1700000000, 123456789)
	for _, withTree := range []bool{false, true} {
		name := "line"
		if withTree {
			name = "line+tree"
		}
		b.Run(name, func(b *testing.B) {
			buf := make([]byte, 0, 1024)
			t := newTree(1)
			prev := GenesisHash
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				buf, prev = p.appendLine(buf[:0], int64(i+1), prev, ts)
				if withTree {
					t.add(leafHash(buf[:len(buf)-1]))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/entry")
		})
	}
	b.Run("tree", func(b *testing.B) {
		line, _ := p.appendLine(nil, 1, GenesisHash, ts)
		line = line[:len(line)-1]
		t := newTree(1)
		b.ReportAllocs()
		for b.Loop() {
			t.add(leafHash(line))
		}
		b.ReportMetric(float64(len(line)), "line-bytes")
	})
}
