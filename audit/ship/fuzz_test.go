package ship

import (
	"strings"
	"testing"

	"github.com/sacpgw/gateway/audit"
)

// The names in a bucket are whatever anyone with write access put there.
// arrange never panics on them, and gives verify only files that are a
// chain's, taken from that chain's own prefix.
func FuzzArrange(f *testing.F) {
	for _, s := range []string{
		"gw-0/gw-0-00000000000000000001.jsonl\ngw-0/checkpoints/00000000000000000000.jsonl",
		"gw-0/gw-1-00000000000000000001.jsonl", "x/checkpoints/00000000000000000007.jsonl\nx/checkpoints/00000000000000000003.jsonl",
		"../gw/gw-00000000000000000001.jsonl", "gw/gw-00000000000000000001.jsonl.12.torn", "/checkpoints/00000000000000000000.jsonl",
	} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, listing string, size int64) {
		var objs []object
		for _, n := range strings.Split(listing, "\n") {
			objs = append(objs, object{name: n, size: size})
		}
		files, _ := arrange(objs, func(s string) string { return "p/" + s })
		for name, os := range files {
			chain, kind := audit.ParseFileName(name)
			if kind == audit.FileOther {
				t.Fatalf("%q is not a trail file", name)
			}
			for _, o := range os {
				want := chain + "/" + name
				if kind == audit.FileCheckpoints {
					want = chain + "/" + piecesDir
				}
				if !strings.HasPrefix(o.name, want) {
					t.Fatalf("%q read from object %q", name, o.name)
				}
			}
		}
	})
}
