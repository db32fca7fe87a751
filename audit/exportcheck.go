package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// ExportReport is the outcome of VerifyExport.
type ExportReport struct {
	File    string              `json:"file"`
	Format  string              `json:"format"`
	Entries int64               `json:"entries"`
	SHA256  string              `json:"sha256"`
	Chains  []ExportChainReport `json:"chains"`
}

// ExportChainReport is what VerifyExport established for one chain of an
// export.
type ExportChainReport struct {
	Chain    string `json:"chain"`
	Count    int64  `json:"count"`
	FirstSeq int64  `json:"first_seq"`
	LastSeq  int64  `json:"last_seq"`
	// Contiguous: every seq from FirstSeq to LastSeq is in the export and
	// every link between them held.
	Contiguous bool `json:"contiguous"`
	// Checkpoint is the manifest's latest checkpoint of the chain;
	// CheckpointInExport is true when its seq is one of the exported
	// entries and that entry has its hash, which ties the entries up to it
	// (through the links, when Contiguous) to the checkpoint.
	Checkpoint         *Checkpoint `json:"checkpoint,omitempty"`
	CheckpointInExport bool        `json:"checkpoint_in_export"`
	// SignaturesChecked: keys were given, and the checkpoint (and the
	// verified_from checkpoint, if any) verified under them.
	SignaturesChecked bool        `json:"signatures_checked"`
	VerifiedFrom      *Checkpoint `json:"verified_from,omitempty"`
}

// VerifyExport checks an export as an auditor receives it: the file and
// its manifest, without the gateway or the audit directory. The manifest
// is read strictly; every entry must parse strictly and hash as recorded
// (a CSV row's other cells must be what its entry cell says), be of a
// chain the manifest lists and match its filter; each chain's seqs must
// rise, its links hold wherever two seqs follow each other (everywhere in
// a contiguous chain), and its first and last entries be the manifest's;
// the entry at a checkpoint's seq must have the checkpoint's hash; the
// counts, size and SHA-256 must be the manifest's. With keys, each chain's
// latest checkpoint (and verified_from) must be signed under one of them.
//
// The first problem is returned as a *Failure naming the export or
// manifest file and, for an entry, its line (a CSV record's first line);
// other errors are I/O errors.
func VerifyExport(file, manifest string, o Options) (ExportReport, error) {
	data, err := os.ReadFile(manifest)
	if err != nil {
		return ExportReport{}, fmt.Errorf("verify export: manifest: %w", err)
	}
	f, err := os.Open(file)
	if err != nil {
		return ExportReport{}, fmt.Errorf("verify export: %w", err)
	}
	defer f.Close()
	return verifyExport(f, data, filepath.Base(file), filepath.Base(manifest), o)
}

// verifyExport is VerifyExport of the export read from r and the manifest
// data; the names are the files' for failures.
func verifyExport(r io.Reader, manifest []byte, name, manifestName string, o Options) (ExportReport, error) {
	ring, err := newKeyRing(o.Keys)
	if err != nil {
		return ExportReport{}, err
	}
	m, err := readManifest(manifest, manifestName)
	if err != nil {
		return ExportReport{}, err
	}
	c, err := newExportCheck(m, name, manifestName, ring)
	if err != nil {
		return ExportReport{}, err
	}
	h := sha256.New()
	cr := &countWriter{w: h}
	r = io.TeeReader(r, cr)
	c.progress = newProgress(o.Progress, "check export")
	c.progress.at("", c.name)
	if m.Format == "csv" {
		err = c.readCSV(r)
	} else {
		err = c.readJSONL(r)
	}
	if err != nil {
		return ExportReport{}, err
	}
	if _, err := io.Copy(io.Discard, r); err != nil { // what a reader left unread still counts
		return ExportReport{}, fmt.Errorf("verify export: read %s: %w", name, err)
	}
	return c.finish(cr.n, hex.EncodeToString(h.Sum(nil)))
}

// readManifest parses a manifest strictly: one JSON object of the
// Manifest's fields, no other member.
func readManifest(data []byte, name string) (Manifest, error) {
	bad := func(format string, a ...any) (Manifest, error) {
		return Manifest{}, &Failure{File: name, Reason: "malformed manifest: " + fmt.Sprintf(format, a...)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return bad("%v", err)
	}
	if dec.More() {
		return bad("more than one JSON value")
	}
	switch {
	case m.Version != 1:
		return bad("version %d, want 1", m.Version)
	case m.Format != "jsonl" && m.Format != "csv":
		return bad("format %q, want jsonl or csv", m.Format)
	case !isHex64(m.SHA256):
		return bad("sha256 is not 64 lowercase hex digits")
	}
	return m, nil
}

// exportCheck is the state of VerifyExport while it reads the file.
type exportCheck struct {
	m        Manifest
	name     string // the export file's base name, for failures
	filter   Filter
	chains   map[string]*chainCheck
	count    int64
	lastLine int
	progress *progress
}

type chainCheck struct {
	man       *ManifestChain
	rep       ExportChainReport
	lastHash  string
	linksHeld bool // every pair of consecutive seqs seen so far linked
}

// newExportCheck checks the manifest's own consistency (and signatures)
// before a line is read.
func newExportCheck(m Manifest, name, manifestName string, ring *keyRing) (*exportCheck, error) {
	c := &exportCheck{m: m, name: name, chains: map[string]*chainCheck{}}
	bad := func(format string, a ...any) (*exportCheck, error) {
		return nil, &Failure{File: manifestName, Reason: fmt.Sprintf(format, a...)}
	}
	var err error
	if c.filter, err = m.Filter.parse(); err != nil {
		return bad("filter: %v", err)
	}
	for i := range m.Chains {
		mc := &c.m.Chains[i]
		if _, dup := c.chains[mc.Chain]; dup || validChain(mc.Chain) != nil {
			return bad("chains[%d]: chain %q is invalid or listed twice", i, mc.Chain)
		}
		if err := checkManifestChain(mc, ring); err != nil {
			return bad("chain %q: %v", mc.Chain, err)
		}
		c.chains[mc.Chain] = &chainCheck{man: mc, linksHeld: true, rep: ExportChainReport{Chain: mc.Chain,
			Checkpoint: mc.LatestCheckpoint, VerifiedFrom: mc.VerifiedFrom, SignaturesChecked: !ring.empty() && mc.Count > 0}}
	}
	return c, nil
}

// checkManifestChain checks what a manifest says of one chain against
// itself, and the checkpoints' signatures under ring.
func checkManifestChain(mc *ManifestChain, ring *keyRing) error {
	switch {
	case mc.Count < 0 || mc.ChainLastSeq < 0:
		return errors.New("negative count or seq")
	case mc.Count == 0:
		return nil
	case mc.FirstSeq < 1 || mc.LastSeq < mc.FirstSeq || mc.LastSeq > mc.ChainLastSeq || mc.LastSeq-mc.FirstSeq+1 < mc.Count:
		return fmt.Errorf("first_seq %d, last_seq %d, count %d and chain_last_seq %d do not fit together",
			mc.FirstSeq, mc.LastSeq, mc.Count, mc.ChainLastSeq)
	case mc.Contiguous != (mc.LastSeq-mc.FirstSeq+1 == mc.Count):
		return fmt.Errorf("contiguous is %v for %d entries from seq %d to %d", mc.Contiguous, mc.Count, mc.FirstSeq, mc.LastSeq)
	case mc.FirstSeq == 1 && mc.FirstPrevHash != GenesisHash:
		return errors.New("first_prev_hash of seq 1 is not the genesis hash (64 zeros)")
	case mc.LastSeq == mc.ChainLastSeq && mc.LastHash != mc.ChainLastHash:
		return errors.New("last_hash differs from chain_last_hash at the same seq")
	case mc.VerifiedFrom != nil && !mc.SignaturesChecked:
		// A start point is only taken from a checkpoint whose signature
		// the gateway checked.
		return errors.New("verified_from without signatures_checked")
	}
	for _, c := range []struct {
		name string
		cp   *Checkpoint
	}{{"latest_checkpoint", mc.LatestCheckpoint}, {"verified_from", mc.VerifiedFrom}} {
		if c.cp == nil {
			continue
		}
		if err := checkManifestCheckpoint(mc, c.cp, ring); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	if !ring.empty() && (mc.LatestCheckpoint == nil || mc.LatestCheckpoint.Signature == "") {
		return errors.New("latest_checkpoint: no signed checkpoint, the export cannot be tied to a signature")
	}
	return nil
}

func checkManifestCheckpoint(mc *ManifestChain, cp *Checkpoint, ring *keyRing) error {
	line := cp.line()
	if _, err := parseCheckpoint(line[:len(line)-1]); err != nil {
		return err
	}
	switch {
	case cp.Chain != mc.Chain:
		return fmt.Errorf("of chain %q", cp.Chain)
	case cp.Seq > mc.ChainLastSeq:
		return fmt.Errorf("seq %d is beyond chain_last_seq %d", cp.Seq, mc.ChainLastSeq)
	case cp.Seq == mc.ChainLastSeq && cp.Hash != mc.ChainLastHash:
		return fmt.Errorf("hash differs from chain_last_hash at seq %d", cp.Seq)
	case cp.Seq == mc.LastSeq && cp.Hash != mc.LastHash, cp.Seq == mc.FirstSeq && cp.Hash != mc.FirstHash:
		return fmt.Errorf("hash differs from the manifest's entry at seq %d", cp.Seq)
	}
	if ring.empty() {
		return nil
	}
	if cp.Signature == "" {
		return errors.New("not signed")
	}
	return ring.check(*cp)
}

// parse turns the manifest's filter back into a Filter.
func (mf ManifestFilter) parse() (Filter, error) {
	f := Filter{Agent: mf.Agent, Kind: mf.Kind}
	var err error
	if mf.Since != "" {
		if f.Since, err = time.Parse(time.RFC3339Nano, mf.Since); err != nil {
			return f, fmt.Errorf("since: %w", err)
		}
	}
	if mf.Until != "" {
		if f.Until, err = time.Parse(time.RFC3339Nano, mf.Until); err != nil {
			return f, fmt.Errorf("until: %w", err)
		}
	}
	return f, nil
}

func (c *exportCheck) fail(line int, seq int64, chain, format string, a ...any) error {
	return &Failure{Chain: chain, File: c.name, Line: line, Seq: seq, Reason: fmt.Sprintf(format, a...)}
}

func (c *exportCheck) readJSONL(r io.Reader) error {
	var stop error // what ended the reading: a torn line, a bad entry
	err := readLines(r, c.name, func(num int, line []byte, complete bool) bool {
		if !complete {
			stop = c.fail(num, 0, "", "torn line (no newline at end of file): the file is cut short")
		} else {
			_, stop = c.entry(num, line)
		}
		return stop == nil
	})
	if err != nil {
		return fmt.Errorf("verify export: %w", err)
	}
	return stop
}

func (c *exportCheck) readCSV(r io.Reader) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(csvColumns)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return c.fail(1, 0, "", "no CSV header: %v", err)
	}
	if !slices.Equal(header, CSVColumns()) {
		return c.fail(1, 0, "", "the CSV header is not the columns of an export")
	}
	var row []string
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return c.fail(pe.StartLine, 0, "", "malformed CSV record: %v", pe.Err)
		}
		if err != nil {
			return fmt.Errorf("verify export: read %s: %w", c.name, err)
		}
		line, _ := cr.FieldPos(0)
		entry := []byte(rec[len(rec)-1])
		e, err := c.entry(line, entry)
		if err != nil {
			return err
		}
		row = csvRow(row, lineEntry{e: e, line: entry})
		for i, cell := range rec {
			if cell != row[i] {
				return c.fail(line, e.Seq, e.Chain, "column %s is %q, its entry says %q", csvColumns[i].name, cell, row[i])
			}
		}
	}
}

// entry checks one exported entry, at line num of the file.
func (c *exportCheck) entry(num int, line []byte) (Entry, error) {
	c.lastLine = num
	e, err := parseEntry(line)
	switch {
	case errors.Is(err, errHashMismatch), errors.Is(err, errNotCanonical):
		return e, c.fail(num, e.Seq, e.Chain, "%v", err)
	case err != nil:
		return e, c.fail(num, 0, "", "malformed entry: %v", err)
	}
	return e, c.place(num, e)
}

// place checks where entry e, at line num, stands in its chain and counts it.
func (c *exportCheck) place(num int, e Entry) error {
	cc := c.chains[e.Chain]
	if cc == nil {
		return c.fail(num, e.Seq, e.Chain, "entry of chain %q, which the manifest does not list", e.Chain)
	}
	if !c.filter.match(e) {
		return c.fail(num, e.Seq, e.Chain, "entry outside the manifest's filter")
	}
	man, rep := cc.man, &cc.rep
	switch {
	case rep.Count == 0 && (e.Seq != man.FirstSeq || e.Hash != man.FirstHash || e.PrevHash != man.FirstPrevHash):
		return c.fail(num, e.Seq, e.Chain, "the first entry of chain %q is seq %d, the manifest's first is seq %d (or its hash differs): lines removed or moved",
			e.Chain, e.Seq, man.FirstSeq)
	case rep.Count > 0 && e.Seq <= rep.LastSeq:
		return c.fail(num, e.Seq, e.Chain, "seq %d after seq %d of chain %q: lines repeated or reordered", e.Seq, rep.LastSeq, e.Chain)
	case rep.Count > 0 && man.Contiguous && e.Seq != rep.LastSeq+1:
		return c.fail(num, e.Seq, e.Chain, "seq gap: expected seq %d of chain %q, found seq %d (lines missing or reordered)", rep.LastSeq+1, e.Chain, e.Seq)
	case rep.Count > 0 && e.Seq == rep.LastSeq+1 && e.PrevHash != cc.lastHash:
		return c.fail(num, e.Seq, e.Chain, "broken link: prev_hash is not the hash of seq %d", rep.LastSeq)
	case e.Seq > man.LastSeq:
		return c.fail(num, e.Seq, e.Chain, "seq %d is beyond the manifest's last_seq %d of chain %q", e.Seq, man.LastSeq, e.Chain)
	}
	if cp := man.LatestCheckpoint; cp != nil && cp.Seq == e.Seq {
		if cp.Hash != e.Hash {
			return c.fail(num, e.Seq, e.Chain, "the hash differs from the manifest's latest_checkpoint at seq %d", e.Seq)
		}
		rep.CheckpointInExport = true
	}
	if rep.Count > 0 && e.Seq != rep.LastSeq+1 {
		cc.linksHeld = false
	}
	if rep.Count == 0 {
		rep.FirstSeq = e.Seq
	}
	rep.Count++
	rep.LastSeq, cc.lastHash = e.Seq, e.Hash
	c.count++
	c.progress.step()
	return nil
}

// finish compares what was read with the manifest's totals.
func (c *exportCheck) finish(size int64, sum string) (ExportReport, error) {
	end := func(format string, a ...any) (ExportReport, error) {
		return ExportReport{}, c.fail(0, 0, "", "after line %d, the end of the file: %s", c.lastLine, fmt.Sprintf(format, a...))
	}
	rep := ExportReport{File: c.name, Format: c.m.Format, Entries: c.count, SHA256: sum}
	for i := range c.m.Chains {
		cc := c.chains[c.m.Chains[i].Chain]
		man := cc.man
		switch {
		case cc.rep.Count != man.Count && cc.rep.Count > 0 && cc.rep.LastSeq != man.LastSeq:
			return end("chain %q ends at seq %d, the manifest's last_seq is %d: lines missing at the end", man.Chain, cc.rep.LastSeq, man.LastSeq)
		case cc.rep.Count != man.Count:
			return end("chain %q has %d entries, the manifest says %d", man.Chain, cc.rep.Count, man.Count)
		case man.Count > 0 && cc.lastHash != man.LastHash:
			return end("the last entry of chain %q has another hash than the manifest's last_hash", man.Chain)
		}
		cc.rep.Contiguous = man.Count > 0 && cc.linksHeld
		rep.Chains = append(rep.Chains, cc.rep)
	}
	switch {
	case c.count != c.m.Count:
		return end("%d entries, the manifest says count %d", c.count, c.m.Count)
	case size != c.m.Bytes:
		return end("%d bytes, the manifest says %d", size, c.m.Bytes)
	case sum != c.m.SHA256:
		return end("sha256 %s, the manifest says %s", sum, c.m.SHA256)
	}
	return rep, nil
}
