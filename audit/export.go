package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Filter selects entries for Export; zero fields select everything.
type Filter struct {
	Since time.Time // ts >= Since
	Until time.Time // ts < Until
	Agent string    // agent_id equals Agent
	Kind  string    // kind equals Kind; a trailing "*" matches a prefix ("llm.*")
}

func (f Filter) match(e Entry) bool {
	switch {
	case !f.Since.IsZero() && e.TS.Before(f.Since):
		return false
	case !f.Until.IsZero() && !e.TS.Before(f.Until):
		return false
	case f.Agent != "" && e.AgentID != f.Agent:
		return false
	}
	if prefix, ok := strings.CutSuffix(f.Kind, "*"); ok {
		return strings.HasPrefix(e.Kind, prefix)
	}
	return f.Kind == "" || e.Kind == f.Kind
}

// Manifest describes an export so a third party can check it without the
// gateway (docs/compliance.md). Export writes it beside the export as
// <out>.manifest.json; ExportTo returns it for the caller to hand over.
type Manifest struct {
	Version int            `json:"version"` // 1
	Created string         `json:"created"`
	File    string         `json:"file"` // the export's base name; ExportTo's name ("-" for stdout)
	Format  string         `json:"format"`
	Bytes   int64          `json:"bytes"`
	SHA256  string         `json:"sha256"` // of the export file
	Filter  ManifestFilter `json:"filter"`
	Count   int64          `json:"count"`
	// Verified: every chain in the directory was verified before the
	// export (Export refuses a broken chain): from seq 1, or from the
	// chain's verified_from checkpoint.
	Verified bool            `json:"verified"`
	Chains   []ManifestChain `json:"chains"`
}

// ManifestFilter is the Filter as given; empty means "not filtered".
type ManifestFilter struct {
	Since string `json:"since"`
	Until string `json:"until"`
	Agent string `json:"agent"`
	Kind  string `json:"kind"`
}

// ManifestChain is one chain's part of an export.
type ManifestChain struct {
	Chain         string `json:"chain"`
	Count         int64  `json:"count"`
	FirstSeq      int64  `json:"first_seq"`
	FirstHash     string `json:"first_hash"`
	FirstPrevHash string `json:"first_prev_hash"`
	LastSeq       int64  `json:"last_seq"`
	LastHash      string `json:"last_hash"`
	// Contiguous is true when the exported entries are seqs FirstSeq to
	// LastSeq without a gap, so their links can be checked from the export
	// alone (from FirstPrevHash on; from the genesis hash when FirstSeq is 1).
	Contiguous bool `json:"contiguous"`
	// ChainLastSeq and ChainLastHash are the chain's end when exported.
	ChainLastSeq  int64  `json:"chain_last_seq"`
	ChainLastHash string `json:"chain_last_hash"`
	// LatestCheckpoint is the chain's latest checkpoint, signed or not.
	LatestCheckpoint *Checkpoint `json:"latest_checkpoint"`
	// VerifiedFrom is the signed checkpoint the chain was verified from
	// before the export (one with --since and a public key: the last
	// signed checkpoint before the window); null: verified from seq 1.
	// EntriesVerified counts the entries checked, from there to the end.
	VerifiedFrom    *Checkpoint `json:"verified_from"`
	EntriesVerified int64       `json:"entries_verified"`
	// SignaturesChecked: the chain's checkpoint signatures were verified
	// under the public keys given to the export.
	SignaturesChecked bool `json:"signatures_checked"`
}

// Export verifies dir (and refuses if a chain is broken), then writes the
// entries f selects to the file out, merged across chains by ts (ties by
// chain, then seq; each chain stays in seq order), and out.manifest.json.
// format is "jsonl" (the original lines, byte for byte) or "csv" (the
// columns of CSVColumns). A file already at out is left alone when the
// export is refused. With o.Keys, signatures are verified too, and a
// filter with Since verifies each chain only from its last signed
// checkpoint before Since (the manifest's verified_from).
func Export(dir string, f Filter, format, out string, o Options) (Manifest, error) {
	return ExportFS(os.DirFS(dir), f, format, out, o)
}

// ExportFS is Export of the trail at the root of fsys (object storage).
func ExportFS(fsys fs.FS, f Filter, format, out string, o Options) (Manifest, error) {
	p, err := planExport(fsys, f, format, o)
	if err != nil {
		return Manifest{}, err
	}
	file, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return Manifest{}, fmt.Errorf("export: %w", err)
	}
	m, err := p.write(file, filepath.Base(out))
	if err == nil {
		err = file.Sync() // the manifest must never describe bytes a crash could lose
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(out)
		return Manifest{}, fmt.Errorf("export %s: %w", out, err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, fmt.Errorf("export manifest: %w", err)
	}
	if err := writeSynced(out+".manifest.json", append(data, '\n')); err != nil {
		return Manifest{}, fmt.Errorf("export manifest: %w", err)
	}
	return m, nil
}

// ExportTo is Export to a stream (the command line's --out -): it verifies
// dir, writes the selected entries to w and returns the manifest, with
// File set to name, instead of writing a manifest file. Nothing is written
// to w when the export is refused.
func ExportTo(w io.Writer, dir string, f Filter, format, name string, o Options) (Manifest, error) {
	return ExportToFS(w, os.DirFS(dir), f, format, name, o)
}

// ExportToFS is ExportTo of the trail at the root of fsys.
func ExportToFS(w io.Writer, fsys fs.FS, f Filter, format, name string, o Options) (Manifest, error) {
	p, err := planExport(fsys, f, format, o)
	if err != nil {
		return Manifest{}, err
	}
	m, err := p.write(w, name)
	if err != nil {
		return Manifest{}, fmt.Errorf("export to %s: %w", name, err)
	}
	return m, nil
}

// exportPlan is a verified directory's selected entries, ready to write.
type exportPlan struct {
	format   string
	filter   Filter
	chains   []*chainFiles
	ends     map[string]ChainReport // each chain as verified
	sources  []iter.Seq2[lineEntry, error]
	progress *progress
}

// planExport checks the format and verifies dir; the entries are read only
// up to each chain's end as verified, so entries appended meanwhile are
// not exported unverified.
func planExport(fsys fs.FS, f Filter, format string, o Options) (*exportPlan, error) {
	if format != "jsonl" && format != "csv" {
		return nil, fmt.Errorf("export: format %q: want jsonl or csv", format)
	}
	o.Since = f.Since
	rep, err := VerifyFS(fsys, o)
	if err != nil {
		return nil, fmt.Errorf("export refused: %w", err)
	}
	chains, err := scanFS(fsys)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	p := &exportPlan{format: format, filter: f, chains: chains, ends: map[string]ChainReport{},
		sources: make([]iter.Seq2[lineEntry, error], len(chains)), progress: newProgress(o.Progress, "export")}
	for _, cr := range rep.Chains {
		p.ends[cr.Chain] = cr
	}
	for i, cf := range chains {
		p.sources[i] = selected(entries(fsys, cf, p.ends[cf.chain], p.progress), f)
	}
	return p, nil
}

// write writes the export to w and returns its manifest.
func (p *exportPlan) write(w io.Writer, name string) (Manifest, error) {
	m, err := writeExport(w, p.format, p.sources, p.progress)
	if err != nil {
		return Manifest{}, err
	}
	m.Version, m.Verified = 1, true
	m.Created = time.Now().UTC().Format(tsLayout)
	m.File, m.Format = name, p.format
	m.Filter = ManifestFilter{Agent: p.filter.Agent, Kind: p.filter.Kind}
	if !p.filter.Since.IsZero() {
		m.Filter.Since = p.filter.Since.UTC().Format(time.RFC3339Nano)
	}
	if !p.filter.Until.IsZero() {
		m.Filter.Until = p.filter.Until.UTC().Format(time.RFC3339Nano)
	}
	for i, cf := range p.chains {
		c := &m.Chains[i]
		c.Chain = cf.chain
		c.Contiguous = c.Count > 0 && c.LastSeq-c.FirstSeq+1 == c.Count
		c.ChainLastSeq, c.ChainLastHash = p.ends[cf.chain].LastSeq, p.ends[cf.chain].LastHash
		end := p.ends[cf.chain]
		c.LatestCheckpoint = end.LastCheckpoint
		c.VerifiedFrom, c.EntriesVerified, c.SignaturesChecked = end.VerifiedFrom, end.Entries, end.SignaturesChecked
	}
	return m, nil
}

// writeExport merges sources by ts into w and fills in the manifest's
// count, size, sha256 and per-chain first/last entries.
func writeExport(w io.Writer, format string, sources []iter.Seq2[lineEntry, error], p *progress) (Manifest, error) {
	m := Manifest{Chains: make([]ManifestChain, len(sources))}
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(w, h)}
	bw := bufio.NewWriterSize(cw, 256<<10)
	var cv *csv.Writer
	var row []string
	if format == "csv" {
		cv = csv.NewWriter(bw)
		if err := cv.Write(CSVColumns()); err != nil {
			return m, err
		}
		row = make([]string, 0, len(csvColumns))
	}
	err := merge(sources, func(i int, le lineEntry) error {
		c := &m.Chains[i]
		if c.Count == 0 {
			c.FirstSeq, c.FirstHash, c.FirstPrevHash = le.e.Seq, le.e.Hash, le.e.PrevHash
		}
		c.Count++
		c.LastSeq, c.LastHash = le.e.Seq, le.e.Hash
		m.Count++
		p.step()
		if cv == nil {
			_, _ = bw.Write(le.line)
			return bw.WriteByte('\n')
		}
		row = csvRow(row, le)
		return cv.Write(row)
	})
	if err != nil {
		return m, err
	}
	if cv != nil {
		if cv.Flush(); cv.Error() != nil {
			return m, cv.Error()
		}
	}
	if err := bw.Flush(); err != nil {
		return m, err
	}
	m.Bytes, m.SHA256 = cw.n, hex.EncodeToString(h.Sum(nil))
	return m, nil
}

// merge calls fn with entries from all sources, smallest ts first (ties:
// the lower source index, then seq), never reordering one source.
func merge(sources []iter.Seq2[lineEntry, error], fn func(source int, le lineEntry) error) error {
	type head struct {
		le   lineEntry
		ok   bool
		next func() (lineEntry, error, bool)
	}
	heads := make([]head, len(sources))
	advance := func(h *head) error {
		le, err, ok := h.next()
		if err != nil {
			return err
		}
		h.le, h.ok = le, ok
		return nil
	}
	for i, src := range sources {
		next, stop := iter.Pull2(src)
		defer stop()
		heads[i].next = next
		if err := advance(&heads[i]); err != nil {
			return err
		}
	}
	for {
		best := -1
		for i := range heads {
			if heads[i].ok && (best < 0 || heads[i].le.e.TS.Before(heads[best].le.e.TS)) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		if err := fn(best, heads[best].le); err != nil {
			return err
		}
		if err := advance(&heads[best]); err != nil {
			return err
		}
	}
}

// selected filters a chain's entries.
func selected(src iter.Seq2[lineEntry, error], f Filter) iter.Seq2[lineEntry, error] {
	return func(yield func(lineEntry, error) bool) {
		for le, err := range src {
			if err != nil || f.match(le.e) {
				if !yield(le, err) {
					return
				}
			}
		}
	}
}

// csvColumns are the columns of a CSV export, fixed so that a spreadsheet,
// a script or a SIEM mapping written against one export reads the next
// (docs/compliance.md lists them; TestExportCSV holds the header). Each
// cell comes from an entry field or a summary member that the gateway's
// kinds write under one name; a member an entry does not have is an empty
// cell. What no column holds is in the last column, the entry itself.
// Add columns at the end (before "entry") only, never rename or reorder.
var csvColumns = []struct {
	name string
	cell func(le lineEntry, s summary) string
}{
	{"seq", func(le lineEntry, _ summary) string { return strconv.FormatInt(le.e.Seq, 10) }},
	{"ts", func(le lineEntry, _ summary) string { return le.e.TS.UTC().Format(tsLayout) }},
	{"chain", func(le lineEntry, _ summary) string { return cellSafe(le.e.Chain) }},
	{"kind", func(le lineEntry, _ summary) string { return cellSafe(le.e.Kind) }},
	{"agent_id", func(le lineEntry, _ summary) string { return cellSafe(le.e.AgentID) }},
	{"session_id", func(le lineEntry, _ summary) string { return cellSafe(le.e.SessionID) }},
	{"request_id", func(le lineEntry, _ summary) string { return cellSafe(le.e.RequestID) }},
	{"correlation_id", summaryAt("correlation_id")},
	{"route", summaryAt("route")},
	{"model", summaryAt("model")},
	{"upstream", summaryAt("upstream")},
	{"status", summaryAt("status")},
	{"error_code", summaryAt("error_code")},
	{"decision", summaryAt("decision")},
	// The policy decision behind the entry: the approval and workflow
	// kinds carry it as decision_id, the request kinds in their checks.
	{"decision_id", func(_ lineEntry, s summary) string {
		if c := s.cell("decision_id"); c != "" {
			return c
		}
		return s.cell("checks", "policy", "decision_id")
	}},
	{"policy_verdict", summaryAt("checks", "policy", "verdict")},
	{"reviewer", summaryAt("reviewer")},
	{"reason", summaryAt("reason")},
	{"tokens_prompt", summaryAt("tokens", "prompt")},
	{"tokens_completion", summaryAt("tokens", "completion")},
	{"tokens_total", summaryAt("tokens", "total")},
	{"cost_usd", summaryAt("cost", "usd")},
	{"latency_ms", summaryAt("latency_ms")},
	{"message_id", summaryAt("message_id")},
	{"run_id", summaryAt("run_id")},
	{"workflow", summaryAt("workflow")},
	{"payload_sha256", func(le lineEntry, _ summary) string { return le.e.PayloadSHA256 }},
	{"prev_hash", func(le lineEntry, _ summary) string { return le.e.PrevHash }},
	{"hash", func(le lineEntry, _ summary) string { return le.e.Hash }},
	// The line as written, byte for byte: its hash can be checked (§6.2 of
	// docs/compliance.md) and nothing is lost to the fixed columns. It
	// starts with '{', so no spreadsheet takes it for a formula.
	{"entry", func(le lineEntry, _ summary) string { return string(le.line) }},
}

// CSVColumns returns the header of a CSV export.
func CSVColumns() []string {
	names := make([]string, len(csvColumns))
	for i, c := range csvColumns {
		names[i] = c.name
	}
	return names
}

func summaryAt(path ...string) func(lineEntry, summary) string {
	return func(_ lineEntry, s summary) string { return s.cell(path...) }
}

func csvRow(row []string, le lineEntry) []string {
	var s summary
	_ = json.Unmarshal(le.e.Summary, &s) // a verified entry's summary is an object; anything else leaves the cells empty
	row = row[:0]
	for _, c := range csvColumns {
		row = append(row, c.cell(le, s))
	}
	return row
}

// summary is an entry's summary, one level decoded.
type summary map[string]json.RawMessage

// cell is the CSV cell of the member at path: a string unquoted (and made
// spreadsheet-safe), null or absent as "", a number or boolean as written,
// an object or array as its JSON text.
func (s summary) cell(path ...string) string {
	raw := s[path[0]]
	for _, k := range path[1:] {
		var m summary
		if json.Unmarshal(raw, &m) != nil {
			return ""
		}
		raw = m[k]
	}
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return ""
	case raw[0] == '"':
		var str string
		_ = json.Unmarshal(raw, &str)
		return cellSafe(str)
	case raw[0] == 'n':
		return ""
	}
	return string(raw)
}

// cellSafe defuses spreadsheet formulas (OWASP "CSV injection"): a text
// cell starting with = + - @ tab or CR gets a leading apostrophe. The
// JSONL export is the exact record; the CSV is for reading.
func cellSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
