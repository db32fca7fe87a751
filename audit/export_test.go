package audit

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
			Object: Members("model", "m", "tokens", map[string]any{"total": i})}
		if i == 7 {
			r.Object.Str("reason", "=HYPERLINK(\"http://x\")")
			r.Object.Any("extra", map[string]any{"deep": map[string]any{"x": true}, "list": []any{1, 2}})
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
			m, err := Export(dir, tc.f, "jsonl", out, Options{})
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
	m, err := Export(dir, Filter{Since: all[4].e.TS, Until: all[20].e.TS}, "jsonl", out, Options{})
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
	m, err = Export(dir, Filter{Kind: KindAuthFailure}, "jsonl", out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Chains[0].Contiguous || m.Filter.Kind != KindAuthFailure {
		t.Errorf("filtered by kind: %+v", m)
	}
}

// csvHeader is the CSV export's header, as docs/compliance.md documents
// it: a change here is a change of the export format.
const csvHeader = "seq,ts,chain,kind,agent_id,session_id,request_id,correlation_id,route,model,upstream,status,error_code," +
	"decision,decision_id,policy_verdict,reviewer,reason,tokens_prompt,tokens_completion,tokens_total,cost_usd,latency_ms," +
	"message_id,run_id,workflow,payload_sha256,prev_hash,hash,entry"

func TestExportCSV(t *testing.T) {
	dir := t.TempDir()
	all := twoChains(t, dir)
	out := filepath.Join(t.TempDir(), "export.csv")
	m, err := Export(dir, Filter{}, "csv", out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(must(os.ReadFile(out)))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows[0], ","); got != csvHeader {
		t.Fatalf("header %s\nwant   %s", got, csvHeader)
	}
	if len(rows) != 31 {
		t.Fatalf("%d rows", len(rows))
	}
	col := func(name string) int { return slices.Index(rows[0], name) }
	for i, row := range rows[1:] {
		e := all[i].e
		want := map[string]string{"seq": itoa(e.Seq), "ts": e.TS.Format(tsLayout), "chain": e.Chain, "kind": e.Kind,
			"agent_id": e.AgentID, "request_id": e.RequestID, "model": "m", "tokens_total": itoa(int64(i)),
			"hash": e.Hash, "prev_hash": e.PrevHash, "entry": string(all[i].line)}
		for name, v := range want {
			if row[col(name)] != v {
				t.Errorf("row %d %s = %q, want %q", i, name, row[col(name)], v)
			}
		}
	}
	if r7 := rows[8]; r7[col("reason")] != `'=HYPERLINK("http://x")` {
		t.Errorf("row 7 reason %q: a formula must not reach a spreadsheet", r7[col("reason")])
	}
	checkManifest(t, out, m, 30)
}

// TestExportCSVColumns: each fixed column takes its cell from where the
// gateway's kinds write that fact, and is empty where an entry has none.
func TestExportCSVColumns(t *testing.T) {
	checks := map[string]any{"auth": map[string]any{"verdict": "pass"}, "policy": map[string]any{"verdict": "allow", "decision_id": "d-llm"}}
	for _, tc := range []struct {
		name string
		rec  Record
		want map[string]string // the cells expected besides seq, ts, chain, kind, hashes and entry; every other is empty
	}{
		{"llm.response", Record{Kind: KindLLMResponse, AgentID: "a1", SessionID: "s1", RequestID: "r1", PayloadSHA256: GenesisHash,
			Object: Members("model", "gpt-x", "upstream", "openai", "status", 200, "latency_ms", 12.5, "checks", checks,
				"tokens", map[string]any{"prompt": 3, "completion": 4, "total": 7}, "cost", map[string]any{"usd": "0.000123", "micro_usd": 123},
				"correlation_id", "c1", "run_id", "run-1", "thought", "t", "message", "m")},
			map[string]string{"agent_id": "a1", "session_id": "s1", "request_id": "r1", "payload_sha256": GenesisHash, "model": "gpt-x",
				"upstream": "openai", "status": "200", "latency_ms": "12.5", "decision_id": "d-llm", "policy_verdict": "allow",
				"tokens_prompt": "3", "tokens_completion": "4", "tokens_total": "7", "cost_usd": "0.000123", "correlation_id": "c1", "run_id": "run-1"}},
		{"llm.request refused", Record{Kind: KindLLMRequest, Object: Members("route", "/v1/chat/completions", "status", 413, "error_code", "too_large", "stream", false)},
			map[string]string{"route": "/v1/chat/completions", "status": "413", "error_code": "too_large"}},
		{"agent.decision", Record{Kind: KindAgentDecision, RequestID: "req-1",
			Object: Members("decision_id", "d-appr", "status", "ESCALATED", "state", "ESCALATED", "violations", []any{})},
			map[string]string{"request_id": "req-1", "decision_id": "d-appr", "status": "ESCALATED"}},
		{"escalation.decision", Record{Kind: KindEscalationDecision, Object: Members("decision", "approve", "reviewer", "security-lead", "comment", "ok")},
			map[string]string{"decision": "approve", "reviewer": "security-lead"}},
		{"auth.failure", Record{Kind: KindAuthFailure, Object: Members("route", "/v1/models", "reason", "-1+1", "remote", "10.0.0.1")},
			map[string]string{"route": "/v1/models", "reason": "'-1+1"}},
		{"message.delivery", Record{Kind: "message.delivery", Object: Members("message_id", "m-1", "status", "delivered", "attempts", 1)},
			map[string]string{"message_id": "m-1", "status": "delivered"}},
		{"workflow.step", Record{Kind: "workflow.step", Object: Members("run_id", "run-2", "workflow", "review", "status", "done", "request_id", "inner")},
			map[string]string{"run_id": "run-2", "workflow": "review", "status": "done"}},
		{"a member of another type", Record{Kind: "x.y", Object: Members("model", map[string]any{"name": "m"}, "tokens", 5, "decision", nil)},
			map[string]string{"model": `{"name":"m"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, Config{Dir: dir})
			e, err := l.Append(context.Background(), tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := ExportTo(&buf, dir, Filter{}, "csv", "-", Options{}); err != nil {
				t.Fatal(err)
			}
			rows := must(csv.NewReader(&buf).ReadAll())
			if len(rows) != 2 {
				t.Fatalf("%d rows", len(rows))
			}
			want := map[string]string{"seq": "1", "ts": e.TS.Format(tsLayout), "chain": "gw-test", "kind": tc.rec.Kind,
				"prev_hash": GenesisHash, "hash": e.Hash, "entry": string(allLines(t, dir, "gw-test")[0])}
			for k, v := range tc.want {
				want[k] = v
			}
			for i, name := range rows[0] {
				if rows[1][i] != want[name] {
					t.Errorf("%s = %q, want %q", name, rows[1][i], want[name])
				}
			}
		})
	}
}

func TestExportRefusesBrokenChain(t *testing.T) {
	dir := t.TempDir()
	twoChains(t, dir)
	p := segments(t, dir, "gw-b")[0]
	writeFile(t, p, bytes.Replace(must(os.ReadFile(p)), []byte(`"bob"`), []byte(`"eve"`), 1))
	out := filepath.Join(t.TempDir(), "x.jsonl")
	if _, err := Export(dir, Filter{}, "jsonl", out, Options{}); !IsFailure(err) || !strings.Contains(err.Error(), "export refused") {
		t.Fatalf("Export = %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("an export file was written")
	}
	if _, err := Export(dir, Filter{}, "xml", out, Options{}); err == nil {
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
	if _, err := Export(dir, Filter{}, "jsonl", out, Options{}); err != nil {
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

// TestExportTo: the stream form writes what Export writes to a file and
// returns the manifest Export would write beside it, naming the stream.
func TestExportTo(t *testing.T) {
	dir := t.TempDir()
	twoChains(t, dir)
	for _, format := range []string{"jsonl", "csv"} {
		t.Run(format, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "x."+format)
			fm, err := Export(dir, Filter{Agent: "bob"}, format, out, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			sm, err := ExportTo(&buf, dir, Filter{Agent: "bob"}, format, "-", Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), must(os.ReadFile(out))) {
				t.Errorf("stream differs from the file export")
			}
			if sm.File != "-" || sm.SHA256 != sha256Hex(buf.Bytes()) || sm.Bytes != int64(buf.Len()) || sm.Count != fm.Count || sm.Count == 0 ||
				!slices.EqualFunc(sm.Chains, fm.Chains, func(a, b ManifestChain) bool { return a.Chain == b.Chain && a.LastHash == b.LastHash }) {
				t.Errorf("stream manifest %+v\nfile manifest %+v", sm, fm)
			}
		})
	}
}

// TestExportRefusedWritesNothing: a broken chain leaves the stream empty
// and an earlier export at the same path as it was.
func TestExportRefusedWritesNothing(t *testing.T) {
	dir := t.TempDir()
	twoChains(t, dir)
	out := filepath.Join(t.TempDir(), "x.jsonl")
	writeFile(t, out, []byte("last month's export\n"))
	p := segments(t, dir, "gw-a")[0]
	writeFile(t, p, bytes.Replace(must(os.ReadFile(p)), []byte(`"alice"`), []byte(`"mallory"`), 1))
	var buf bytes.Buffer
	if _, err := ExportTo(&buf, dir, Filter{}, "jsonl", "-", Options{}); !IsFailure(err) || buf.Len() > 0 {
		t.Errorf("ExportTo = %v, wrote %d bytes", err, buf.Len())
	}
	if _, err := Export(dir, Filter{}, "jsonl", out, Options{}); !IsFailure(err) {
		t.Errorf("Export = %v", err)
	}
	if got := string(must(os.ReadFile(out))); got != "last month's export\n" {
		t.Errorf("the earlier export became %q", got)
	}
}
