package audit

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

type exported struct {
	e    Entry
	line []byte
}

// twoChains writes 30 entries alternating between chains gw-a and gw-b,
// with varied kinds, agents and nested summaries, and returns them all.
func twoChains(t *testing.T, dir string) []exported {
	t.Helper()
	logs := []*Log{openLog(t, Config{Dir: dir, Chain: "gw-a"}), openLog(t, Config{Dir: dir, Chain: "gw-b"})}
	kinds := []string{KindLLMRequest, KindLLMResponse, KindAuthFailure}
	var all []exported
	for i := 0; i < 30; i++ {
		r := Record{Kind: kinds[i%3], AgentID: []string{"alice", "bob"}[(i/2)%2], RequestID: "r",
			Summary: map[string]any{"model": "m", "tokens": map[string]any{"total": i}}}
		if i == 7 {
			r.Summary["message"] = "=HYPERLINK(\"http://x\")"
			r.Summary["extra"] = map[string]any{"deep": map[string]any{"x": true}, "list": []any{1, 2}}
		}
		e, err := logs[i%2].Append(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, exported{e: e})
	}
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	lines := map[string][][]byte{"gw-a": allLines(t, dir, "gw-a"), "gw-b": allLines(t, dir, "gw-b")}
	for i := range all {
		all[i].line = lines[all[i].e.Chain][all[i].e.Seq-1]
	}
	return all
}

func TestExportJSONL(t *testing.T) {
	dir := t.TempDir()
	all := twoChains(t, dir)
	mid := all[10].e.TS
	for _, tc := range []struct {
		name string
		f    Filter
		keep func(Entry) bool
	}{
		{"everything", Filter{}, func(Entry) bool { return true }},
		{"agent", Filter{Agent: "bob"}, func(e Entry) bool { return e.AgentID == "bob" }},
		{"kind", Filter{Kind: KindAuthFailure}, func(e Entry) bool { return e.Kind == KindAuthFailure }},
		{"kind prefix", Filter{Kind: "llm.*"}, func(e Entry) bool { return strings.HasPrefix(e.Kind, "llm.") }},
		{"since", Filter{Since: mid}, func(e Entry) bool { return !e.TS.Before(mid) }},
		{"until", Filter{Until: mid}, func(e Entry) bool { return e.TS.Before(mid) }},
		{"nothing", Filter{Agent: "nobody"}, func(Entry) bool { return false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "export.jsonl")
			m, err := Export(dir, tc.f, "jsonl", out)
			if err != nil {
				t.Fatal(err)
			}
			var want []byte
			var wantN int64
			for _, x := range all { // all is in append order, which is ts order
				if tc.keep(x.e) {
					want = append(append(want, x.line...), '\n')
					wantN++
				}
			}
			got := must(os.ReadFile(out))
			if !bytes.Equal(got, want) {
				t.Errorf("export differs:\n%s\nwant\n%s", got, want)
			}
			checkManifest(t, out, m, wantN)
		})
	}
}

func checkManifest(t *testing.T, out string, m Manifest, count int64) {
	t.Helper()
	var onDisk Manifest
	if err := json.Unmarshal(must(os.ReadFile(out+".manifest.json")), &onDisk); err != nil {
		t.Fatal(err)
	}
	data := must(os.ReadFile(out))
	if onDisk.SHA256 != sha256Hex(data) || onDisk.Bytes != int64(len(data)) || onDisk.Count != count || !onDisk.Verified {
		t.Errorf("manifest sha256 %s bytes %d count %d; file sha256 %s bytes %d, want count %d",
			onDisk.SHA256, onDisk.Bytes, onDisk.Count, sha256Hex(data), len(data), count)
	}
	if onDisk.File != filepath.Base(out) || len(onDisk.Chains) != 2 || onDisk.SHA256 != m.SHA256 {
		t.Errorf("manifest %+v", onDisk)
	}
	for _, c := range onDisk.Chains {
		if c.LatestCheckpoint == nil || c.LatestCheckpoint.Seq != 15 || c.ChainLastSeq != 15 {
			t.Errorf("chain %s: checkpoint %+v, chain end %d", c.Chain, c.LatestCheckpoint, c.ChainLastSeq)
		}
	}
}

func TestExportManifestPerChain(t *testing.T) {
	dir := t.TempDir()
	all := twoChains(t, dir)
	out := filepath.Join(t.TempDir(), "x.jsonl")
	m, err := Export(dir, Filter{Since: all[4].e.TS, Until: all[20].e.TS}, "jsonl", out)
	if err != nil {
		t.Fatal(err)
	}
	// Entries 4..19 alternate a, b: gw-a seqs 3..10, gw-b seqs 3..10.
	for i, c := range m.Chains {
		first, last := all[4+i].e, all[18+i].e
		if c.Chain != first.Chain || c.Count != 8 || c.FirstSeq != first.Seq || c.FirstHash != first.Hash ||
			c.FirstPrevHash != first.PrevHash || c.LastSeq != last.Seq || c.LastHash != last.Hash || !c.Contiguous {
			t.Errorf("chain %d = %+v", i, c)
		}
	}
	m, err = Export(dir, Filter{Kind: KindAuthFailure}, "jsonl", out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Chains[0].Contiguous || m.Filter.Kind != KindAuthFailure {
		t.Errorf("filtered by kind: %+v", m)
	}
}

func TestExportCSV(t *testing.T) {
	dir := t.TempDir()
	all := twoChains(t, dir)
	out := filepath.Join(t.TempDir(), "export.csv")
	m, err := Export(dir, Filter{}, "csv", out)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(must(os.ReadFile(out)))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	wantHeader := []string{"seq", "ts", "chain", "kind", "agent_id", "session_id", "request_id", "payload_sha256", "prev_hash", "hash",
		"summary.extra.deep.x", "summary.extra.list", "summary.message", "summary.model", "summary.tokens.total"}
	if strings.Join(rows[0], ",") != strings.Join(wantHeader, ",") {
		t.Fatalf("header %v\nwant   %v", rows[0], wantHeader)
	}
	if len(rows) != 31 {
		t.Fatalf("%d rows", len(rows))
	}
	col := func(name string) int { return sort.SearchStrings(wantHeader[10:], name) + 10 }
	for i, row := range rows[1:] {
		e := all[i].e
		if row[0] != itoa(e.Seq) || row[2] != e.Chain || row[9] != e.Hash || row[1] != e.TS.Format(tsLayout) {
			t.Errorf("row %d = %v", i, row[:10])
		}
		if row[col("summary.tokens.total")] != itoa(int64(i)) {
			t.Errorf("row %d tokens %q", i, row[col("summary.tokens.total")])
		}
	}
	r7 := rows[8]
	if r7[col("summary.message")] != `'=HYPERLINK("http://x")` || r7[col("summary.extra.deep.x")] != "true" || r7[col("summary.extra.list")] != "[1,2]" {
		t.Errorf("row 7 = %v", r7[10:])
	}
	checkManifest(t, out, m, 30)
}

func TestExportRefusesBrokenChain(t *testing.T) {
	dir := t.TempDir()
	twoChains(t, dir)
	p := segments(t, dir, "gw-b")[0]
	writeFile(t, p, bytes.Replace(must(os.ReadFile(p)), []byte(`"bob"`), []byte(`"eve"`), 1))
	out := filepath.Join(t.TempDir(), "x.jsonl")
	if _, err := Export(dir, Filter{}, "jsonl", out); !IsFailure(err) || !strings.Contains(err.Error(), "export refused") {
		t.Fatalf("Export = %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("an export file was written")
	}
	if _, err := Export(dir, Filter{}, "xml", out); err == nil {
		t.Error("format xml accepted")
	}
}

func TestExportMergesByTime(t *testing.T) {
	// Chains written at different moments interleave by ts in the export.
	dir := t.TempDir()
	a := openLog(t, Config{Dir: dir, Chain: "gw-a"})
	b := openLog(t, Config{Dir: dir, Chain: "gw-b"})
	appendN(t, b, 3)
	time.Sleep(2 * time.Millisecond)
	appendN(t, a, 3)
	time.Sleep(2 * time.Millisecond)
	appendN(t, b, 2)
	_ = a.Close()
	_ = b.Close()
	out := filepath.Join(t.TempDir(), "x.jsonl")
	if _, err := Export(dir, Filter{}, "jsonl", out); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, line := range bytes.Split(bytes.TrimSpace(must(os.ReadFile(out))), []byte("\n")) {
		e := must(parseEntry(line))
		order = append(order, e.Chain[3:]+itoa(e.Seq))
	}
	if got := strings.Join(order, " "); got != "b1 b2 b3 a1 a2 a3 b4 b5" {
		t.Errorf("order %s", got)
	}
}

func itoa(n int64) string { return string(must(json.Marshal(n))) }
