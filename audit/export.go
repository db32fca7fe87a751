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
	"iter"
	"os"
	"path/filepath"
	"sort"
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
// gateway (docs/compliance.md). It is written beside the export as
// <out>.manifest.json.
type Manifest struct {
	Version int            `json:"version"` // 1
	Created string         `json:"created"`
	File    string         `json:"file"` // the export's base name
	Format  string         `json:"format"`
	Bytes   int64          `json:"bytes"`
	SHA256  string         `json:"sha256"` // of the export file
	Filter  ManifestFilter `json:"filter"`
	Count   int64          `json:"count"`
	// Verified: every chain in the directory was recomputed from seq 1
	// before the export (Export refuses a broken chain).
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
}

// csvFixed are the first columns of a CSV export; summary fields follow,
// flattened with dots ("summary.tokens.total"), as the sorted union of the
// exported entries' keys.
var csvFixed = []string{"seq", "ts", "chain", "kind", "agent_id", "session_id", "request_id", "payload_sha256", "prev_hash", "hash"}

// Export verifies dir (and refuses if a chain is broken), then writes the
// entries f selects to out, merged across chains by ts (ties by chain, then
// seq; each chain stays in seq order), and out.manifest.json. format is
// "jsonl" (the original lines, byte for byte) or "csv".
func Export(dir string, f Filter, format, out string) (Manifest, error) {
	if format != "jsonl" && format != "csv" {
		return Manifest{}, fmt.Errorf("export: format %q: want jsonl or csv", format)
	}
	rep, err := Verify(dir, nil)
	if err != nil {
		return Manifest{}, fmt.Errorf("export refused: %w", err)
	}
	chains, err := scanDir(dir)
	if err != nil {
		return Manifest{}, err
	}
	ends := map[string]ChainReport{}
	for _, cr := range rep.Chains {
		ends[cr.Chain] = cr
	}
	sources := make([]iter.Seq2[lineEntry, error], len(chains))
	for i, cf := range chains {
		sources[i] = selected(entries(dir, cf, ends[cf.chain].LastSeq), f)
	}

	var columns []string
	if format == "csv" {
		if columns, err = summaryColumns(sources); err != nil {
			return Manifest{}, err
		}
	}
	file, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return Manifest{}, fmt.Errorf("export: %w", err)
	}
	m, err := writeExport(file, format, columns, sources)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(out)
		return Manifest{}, fmt.Errorf("export %s: %w", out, err)
	}
	m.Version, m.Verified = 1, true
	m.Created = time.Now().UTC().Format(tsLayout)
	m.File, m.Format = filepath.Base(out), format
	m.Filter = ManifestFilter{Agent: f.Agent, Kind: f.Kind}
	if !f.Since.IsZero() {
		m.Filter.Since = f.Since.UTC().Format(time.RFC3339Nano)
	}
	if !f.Until.IsZero() {
		m.Filter.Until = f.Until.UTC().Format(time.RFC3339Nano)
	}
	for i, cf := range chains {
		c := &m.Chains[i]
		c.Chain = cf.chain
		c.Contiguous = c.Count > 0 && c.LastSeq-c.FirstSeq+1 == c.Count
		c.ChainLastSeq, c.ChainLastHash = ends[cf.chain].LastSeq, ends[cf.chain].LastHash
		c.LatestCheckpoint = ends[cf.chain].LastCheckpoint
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	if err := writeSynced(out+".manifest.json", append(data, '\n')); err != nil {
		return Manifest{}, fmt.Errorf("export manifest: %w", err)
	}
	return m, nil
}

// writeExport merges sources by ts into w and fills in the manifest's
// count, size, sha256 and per-chain first/last entries.
func writeExport(w *os.File, format string, columns []string, sources []iter.Seq2[lineEntry, error]) (Manifest, error) {
	m := Manifest{Chains: make([]ManifestChain, len(sources))}
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(w, h)}
	bw := bufio.NewWriterSize(cw, 256<<10)
	var cv *csv.Writer
	var row []string
	if format == "csv" {
		cv = csv.NewWriter(bw)
		if err := cv.Write(append(append([]string{}, csvFixed...), columns...)); err != nil {
			return m, err
		}
		row = make([]string, len(csvFixed)+len(columns))
	}
	err := merge(sources, func(i int, le lineEntry) error {
		c := &m.Chains[i]
		if c.Count == 0 {
			c.FirstSeq, c.FirstHash, c.FirstPrevHash = le.e.Seq, le.e.Hash, le.e.PrevHash
		}
		c.Count++
		c.LastSeq, c.LastHash = le.e.Seq, le.e.Hash
		m.Count++
		if cv == nil {
			_, _ = bw.Write(le.line)
			return bw.WriteByte('\n')
		}
		return cv.Write(csvRow(row, le.e, columns))
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
	if err := w.Sync(); err != nil {
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

// summaryColumns is the sorted union of the flattened summary keys of the
// selected entries.
func summaryColumns(sources []iter.Seq2[lineEntry, error]) ([]string, error) {
	keys := map[string]bool{}
	cells := map[string]string{}
	for _, src := range sources {
		for le, err := range src {
			if err != nil {
				return nil, err
			}
			clear(cells)
			flatten("summary", le.e.Summary, cells)
			for k := range cells {
				keys[k] = true
			}
		}
	}
	cols := make([]string, 0, len(keys))
	for k := range keys {
		cols = append(cols, k)
	}
	sort.Strings(cols)
	return cols, nil
}

func csvRow(row []string, e Entry, columns []string) []string {
	row = append(row[:0],
		strconv.FormatInt(e.Seq, 10), e.TS.UTC().Format(tsLayout), cellSafe(e.Chain), cellSafe(e.Kind),
		cellSafe(e.AgentID), cellSafe(e.SessionID), cellSafe(e.RequestID), e.PayloadSHA256, e.PrevHash, e.Hash)
	cells := map[string]string{}
	flatten("summary", e.Summary, cells)
	for _, c := range columns {
		row = append(row, cells[c])
	}
	return row
}

// flatten writes the scalars of a JSON value as dotted keys: strings
// unquoted (and made spreadsheet-safe), null as "", numbers and booleans
// as written, arrays and empty objects as their JSON text.
func flatten(prefix string, raw json.RawMessage, out map[string]string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	switch raw[0] {
	case '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || len(m) == 0 {
			out[prefix] = string(raw)
			return
		}
		for k, v := range m {
			flatten(prefix+"."+k, v, out)
		}
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		out[prefix] = cellSafe(s)
	case 'n':
		out[prefix] = ""
	default:
		out[prefix] = string(raw)
	}
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
