package audit

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"strings"
	"time"
)

// Report is the outcome of Verify.
type Report struct {
	Chains   []ChainReport `json:"chains"`
	Entries  int64         `json:"entries"`  // in all chains
	Failures []Failure     `json:"failures"` // at most one per chain, in chain order
}

// ChainReport describes one chain as far as it verified.
type ChainReport struct {
	Chain          string      `json:"chain"`
	Segments       int         `json:"segments"`
	Entries        int64       `json:"entries"`
	LastSeq        int64       `json:"last_seq"`
	LastHash       string      `json:"last_hash"`
	FirstTS        time.Time   `json:"first_ts"`
	LastTS         time.Time   `json:"last_ts"`
	Checkpoints    int         `json:"checkpoints"`
	LastCheckpoint *Checkpoint `json:"last_checkpoint,omitempty"`
	// SignaturesChecked is true when Verify was given public keys: every
	// signed checkpoint's signature then verified under the key its key id
	// names, and none unsigned came after a signed one, else the chain
	// failed.
	SignaturesChecked bool `json:"signatures_checked"`
	// FirstSigned is the chain's first signed checkpoint, and
	// UnsignedBeforeSigning the number of unsigned checkpoints before it:
	// those of a trail written before a signing key was configured. They
	// are pinned by the links up to FirstSigned, not by a signature.
	FirstSigned           *Checkpoint `json:"first_signed_checkpoint,omitempty"`
	UnsignedBeforeSigning int         `json:"unsigned_before_signing,omitempty"`
	// KeyIDs are the key ids of the signed checkpoints in order, one each
	// time the key changed: two after a key rotation; a return to an
	// earlier key (a rollback, or a retired key in someone's hands) shows
	// as a third. "" stands for checkpoints signed before key ids existed.
	KeyIDs []string `json:"key_ids,omitempty"`
	// VerifiedFrom is the signed checkpoint the chain was verified from
	// (VerifyWith with Since): its signature and the entries from its seq
	// to the end were checked, and Entries counts those; nil means from
	// seq 1. Torn files are then matched only against the recoveries in
	// that part.
	VerifiedFrom *Checkpoint `json:"verified_from,omitempty"`
	// MerkleStart is the seq of the first entry of the chain's Merkle tree
	// (0: none yet); every checkpoint's tree in the part verified was
	// recomputed from the entries.
	MerkleStart int64      `json:"merkle_start,omitempty"`
	Recoveries  []Recovery `json:"recoveries,omitempty"`
	Failure     *Failure   `json:"failure,omitempty"`
}

// Recovery is an audit.recovery entry: bytes a crash left torn, moved aside
// by Open. It is a recorded event, not a failure.
type Recovery struct {
	Seq      int64  `json:"seq"` // of the audit.recovery entry
	File     string `json:"file"`
	TornFile string `json:"torn_file"`
	Offset   int64  `json:"offset"`
	Length   int64  `json:"length"`
	SHA256   string `json:"sha256"`
	// Present is true when the torn file is still in the directory (its
	// content then matched the recorded length and sha256).
	Present bool `json:"present"`
}

// Failure locates the first problem in a chain. Line is 1-based within
// File (0 when the problem is the file itself); Seq is the entry's seq when
// known, else 0.
type Failure struct {
	Chain  string `json:"chain"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	Seq    int64  `json:"seq"`
	Reason string `json:"reason"`
}

func (f *Failure) Error() string {
	loc := f.File
	if f.Line > 0 {
		loc = fmt.Sprintf("%s line %d", loc, f.Line)
	}
	if f.Seq > 0 {
		loc = fmt.Sprintf("%s (seq %d)", loc, f.Seq)
	}
	if f.Chain == "" { // a problem of an export or its manifest as a whole
		return fmt.Sprintf("audit export broken at %s: %s", loc, f.Reason)
	}
	return fmt.Sprintf("audit chain %q broken at %s: %s", f.Chain, loc, f.Reason)
}

// Verify recomputes every chain in dir on its own: each entry's hash, its
// link to the previous entry, gap-free seqs from 1, the segment names, the
// checkpoints (hash at their seq, none beyond the end) and the .torn files
// (each must match an audit.recovery entry). It returns the report and,
// when a chain is broken, a *Failure for the first broken chain; other
// errors are I/O errors.
//
// With public keys (nil ones are ignored, so Verify(dir, nil) checks no
// signature), each chain must also have a signed checkpoint; each signed
// checkpoint must verify under the key its key id names (one without a
// key id, written before key ids existed, under any of the keys); and
// unsigned checkpoints are accepted only before the chain's first signed
// one (a trail that was signed from some day on), never after it: that
// would let someone without the key rewrite the end of a signed chain and
// attest it unsigned.
//
// Run on a directory a gateway is writing, the entry being written at that
// instant may show as a torn line; verify a copy or run it again.
func Verify(dir string, keys ...ed25519.PublicKey) (Report, error) {
	return VerifyWith(dir, Options{Keys: keys})
}

// VerifyWith is Verify with options: the keys, a start at the last signed
// checkpoint before o.Since (the report's VerifiedFrom says where each
// chain started), and progress reports.
func VerifyWith(dir string, o Options) (Report, error) {
	return VerifyFS(os.DirFS(dir), o)
}

// VerifyFS is VerifyWith over the files at the root of fsys: a trail read
// from somewhere other than a local directory (object storage).
func VerifyFS(fsys fs.FS, o Options) (Report, error) {
	ring, err := newKeyRing(o.Keys)
	if err != nil {
		return Report{}, err
	}
	chains, err := scanFS(fsys)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Chains: make([]ChainReport, 0, len(chains))}
	p := newProgress(o.Progress, "verify")
	for _, cf := range chains {
		cr, err := verifyChain(fsys, cf, ring, o.Since, p)
		if err != nil {
			return rep, err
		}
		rep.Entries += cr.Entries
		if cr.Failure != nil {
			rep.Failures = append(rep.Failures, *cr.Failure)
		}
		rep.Chains = append(rep.Chains, cr)
	}
	if len(rep.Failures) > 0 {
		return rep, &rep.Failures[0]
	}
	return rep, nil
}

// keyRing holds the public keys Verify checks signatures with, by key id.
type keyRing struct {
	byID map[string]ed25519.PublicKey
	ids  []string // in the order given, without repeats
}

func newKeyRing(keys []ed25519.PublicKey) (*keyRing, error) {
	r := &keyRing{byID: map[string]ed25519.PublicKey{}}
	for i, k := range keys {
		if k == nil {
			continue
		}
		if len(k) != ed25519.PublicKeySize { // ed25519.Verify would panic on it
			return nil, fmt.Errorf("verify: public key %d is %d bytes, want %d", i+1, len(k), ed25519.PublicKeySize)
		}
		id := KeyID(k)
		if _, ok := r.byID[id]; !ok {
			r.byID[id] = k
			r.ids = append(r.ids, id)
		}
	}
	return r, nil
}

func (r *keyRing) empty() bool { return len(r.ids) == 0 }

// check reports why the signed checkpoint c does not verify, or nil.
func (r *keyRing) check(c Checkpoint) error {
	if c.KeyID == "" {
		// Signed before key ids were written: the key is whichever verifies.
		var err error
		for _, id := range r.ids {
			if err = c.verifySignature(r.byID[id]); err == nil {
				return nil
			}
		}
		if len(r.ids) > 1 {
			return fmt.Errorf("%w under each of the %d keys given (the checkpoint has no key id)", err, len(r.ids))
		}
		return err
	}
	pub, ok := r.byID[c.KeyID]
	if !ok {
		return fmt.Errorf("signed with unknown key id %s (the keys given have key ids %s)", c.KeyID, strings.Join(r.ids, ", "))
	}
	if err := c.verifySignature(pub); err != nil {
		return fmt.Errorf("%w (key id %s)", err, c.KeyID)
	}
	return nil
}

// IsFailure reports whether err (from Verify or Export) is a broken chain
// rather than an I/O or usage problem.
func IsFailure(err error) bool {
	var f *Failure
	return errors.As(err, &f)
}

type cpLine struct {
	cp   Checkpoint
	line int
}

// startCheckpoint is the last signed checkpoint of cps written before
// since, the point a windowed verify starts from; nil when there is none
// (or no signature could be checked, or no window).
func startCheckpoint(cps []cpLine, ring *keyRing, since time.Time) *Checkpoint {
	if since.IsZero() || ring.empty() {
		return nil
	}
	var from *Checkpoint
	for _, c := range cps {
		// loadCheckpoints has checked every signed checkpoint's signature.
		at, err := time.Parse(tsLayout, c.cp.TS)
		if c.cp.Signature != "" && err == nil && at.Before(since) {
			cp := c.cp
			from = &cp
		}
	}
	return from
}

// fromSegment returns the segments a verify starting at from reads (from
// the one holding from.Seq on) and how many lines of the first to skip.
func fromSegment(segs []segmentFile, from *Checkpoint) ([]segmentFile, int64) {
	if from == nil {
		return segs, 0
	}
	i := len(segs) - 1
	for i > 0 && segs[i].firstSeq > from.Seq {
		i--
	}
	if i < 0 || segs[i].firstSeq > from.Seq {
		return segs, 0 // no segment holds it: verify everything, which reports why
	}
	return segs[i:], from.Seq - segs[i].firstSeq
}

// chainWalk is one chain's verify as it walks the segments: the report
// built so far, the checkpoints by the seq they name, the Merkle tree
// recomputed so far, and the seq and prev_hash the next entry must have
// (prev "" at the anchor a windowed verify starts from).
type chainWalk struct {
	fsys   fs.FS
	cf     *chainFiles
	p      *progress
	cr     ChainReport
	bySeq  map[int64][]cpLine
	tc     *treeCheck
	expect int64
	prev   string
}

func verifyChain(fsys fs.FS, cf *chainFiles, ring *keyRing, since time.Time, p *progress) (ChainReport, error) {
	w := &chainWalk{fsys: fsys, cf: cf, p: p,
		cr: ChainReport{Chain: cf.chain, Segments: len(cf.segments), SignaturesChecked: !ring.empty()}}
	cps, cpFail, err := loadCheckpoints(fsys, cf, ring)
	if err != nil {
		return w.cr, err
	}
	w.noteCheckpoints(cps)
	segs, skip, bad := w.start(cps, ring, since)
	if bad != nil {
		return w.failed(bad)
	}
	for _, seg := range segs {
		bad, err := w.segment(seg, skip)
		skip = 0
		if err != nil {
			return w.cr, err
		}
		if bad != nil {
			return w.failed(bad)
		}
	}
	if cpFail != nil {
		return w.failed(cpFail)
	}
	if bad := w.endOfChain(cps, ring); bad != nil {
		return w.failed(bad)
	}
	bad, err = w.tornFiles()
	if err != nil {
		return w.cr, err
	}
	if bad != nil {
		return w.failed(bad)
	}
	return w.cr, nil
}

// failed ends the walk at bad, with the report as far as it verified.
func (w *chainWalk) failed(bad *Failure) (ChainReport, error) {
	w.cr.Failure = bad
	return w.cr, nil
}

// failure is the Failure of this chain at file, line and seq.
func (w *chainWalk) failure(file string, line int, seq int64, format string, args ...any) *Failure {
	return &Failure{Chain: w.cf.chain, File: file, Line: line, Seq: seq, Reason: fmt.Sprintf(format, args...)}
}

// noteCheckpoints puts what the checkpoints say into the report (how many,
// the first signed, the unsigned ones before it, the key ids in turn, the
// last) and indexes them by the seq they name.
func (w *chainWalk) noteCheckpoints(cps []cpLine) {
	cr := &w.cr
	for _, c := range cps {
		if c.cp.Signature == "" {
			if cr.FirstSigned == nil {
				cr.UnsignedBeforeSigning++
			}
			continue
		}
		if cr.FirstSigned == nil {
			first := c.cp
			cr.FirstSigned = &first
		}
		if n := len(cr.KeyIDs); n == 0 || cr.KeyIDs[n-1] != c.cp.KeyID {
			cr.KeyIDs = append(cr.KeyIDs, c.cp.KeyID)
		}
	}
	w.bySeq = map[int64][]cpLine{}
	for _, c := range cps {
		w.bySeq[c.cp.Seq] = append(w.bySeq[c.cp.Seq], c)
	}
	if n := len(cps); n > 0 {
		cr.Checkpoints = n
		last := cps[n-1].cp
		cr.LastCheckpoint = &last
	}
}

// start sets where the walk begins: at seq 1, or (with since) at the
// anchor, the entry of the last signed checkpoint before since. It returns
// the segments to read and how many lines of the first to skip, or why the
// checkpoints' Merkle trees cannot be checked.
func (w *chainWalk) start(cps []cpLine, ring *keyRing, since time.Time) ([]segmentFile, int64, *Failure) {
	cr := &w.cr
	w.expect, w.prev = 1, GenesisHash
	cr.VerifiedFrom = startCheckpoint(cps, ring, since)
	segs, skip := fromSegment(w.cf.segments, cr.VerifiedFrom)
	tc, badCP, err := newTreeCheck(cps, cr.VerifiedFrom)
	if badCP != nil {
		return nil, 0, w.failure(w.cf.checkpoints, badCP.line, badCP.cp.Seq, "%v", err)
	}
	if err != nil {
		return nil, 0, w.failure(w.cf.checkpoints, 0, cr.VerifiedFrom.Seq, "%v", err)
	}
	w.tc = tc
	if tc.t != nil {
		cr.MerkleStart = tc.t.start
	}
	if skip > 0 || len(segs) < len(w.cf.segments) {
		// The checkpoint's entry is the anchor: its hash is tied to the
		// signature (the bySeq check in checkpointsAt), so its prev_hash
		// is taken as it is and every later link is checked.
		w.expect, w.prev = segs[0].firstSeq, ""
	} else {
		cr.VerifiedFrom = nil // it starts at the first segment: a full verify
	}
	return segs, skip, nil
}

// segment walks the lines of seg, the first skip of them not read.
func (w *chainWalk) segment(seg segmentFile, skip int64) (*Failure, error) {
	if seg.firstSeq != w.expect {
		// Name the file that would hold the next entry, so a segment
		// deleted from storage is named, not only its successor.
		return w.failure(seg.name, 0, 0, "segment starts at seq %d, expected seq %d: a segment is missing or renamed (seqs %d-%d, %s)",
			seg.firstSeq, w.expect, w.expect, seg.firstSeq-1, segmentName(w.cf.chain, w.expect)), nil
	}
	w.p.at(w.cf.chain, seg.name)
	var bad *Failure
	err := eachLine(w.fsys, seg.name, func(num int, line []byte, complete bool) bool {
		if int64(num) <= skip {
			return true // before the anchor: not read, let alone trusted
		}
		if skip > 0 && int64(num) == skip+1 {
			w.expect = w.cr.VerifiedFrom.Seq
		}
		bad = w.line(seg.name, num, line, complete)
		return bad == nil
	})
	return bad, err
}

// line checks the entry on line num of file and, if it holds, takes it
// into the report.
func (w *chainWalk) line(file string, num int, line []byte, complete bool) *Failure {
	e, bad := w.link(file, num, line, complete)
	if bad != nil {
		return bad
	}
	w.tc.add(e.Seq, line)
	if bad := w.checkpointsAt(e, file, num); bad != nil {
		return bad
	}
	cr := &w.cr
	if e.Kind == KindRecovery {
		cr.Recoveries = append(cr.Recoveries, recoveryOf(e))
	}
	if cr.Entries == 0 {
		cr.FirstTS = e.TS
	}
	cr.Entries++
	cr.LastSeq, cr.LastHash, cr.LastTS = e.Seq, e.Hash, e.TS
	w.expect, w.prev = e.Seq+1, e.Hash
	w.p.step()
	return nil
}

// link parses the entry on line num of file and checks it is whole, its
// own hash holds, and it is the next entry of this chain, linked to the
// one before (or, at the anchor, has the hash of the checkpoint).
func (w *chainWalk) link(file string, num int, line []byte, complete bool) (Entry, *Failure) {
	f := func(seq int64, format string, args ...any) (Entry, *Failure) {
		return Entry{}, w.failure(file, num, seq, format, args...)
	}
	if !complete {
		return f(0, "torn line (no newline at end of file) where seq %d was expected", w.expect)
	}
	e, err := parseEntry(line)
	switch {
	case errors.Is(err, errHashMismatch), errors.Is(err, errNotCanonical):
		return f(e.Seq, "%v", err)
	case err != nil:
		return f(0, "malformed entry where seq %d was expected: %v", w.expect, err)
	case e.Chain != w.cf.chain:
		return f(e.Seq, "entry of chain %q in a segment of chain %q", e.Chain, w.cf.chain)
	case e.Seq > w.expect:
		return f(e.Seq, "seq gap: expected seq %d, found seq %d (entries missing or reordered)", w.expect, e.Seq)
	case e.Seq < w.expect:
		return f(e.Seq, "seq %d repeated or out of order (expected seq %d)", e.Seq, w.expect)
	case w.prev != "" && e.PrevHash != w.prev:
		return f(e.Seq, "broken link: prev_hash is not the hash of seq %d", e.Seq-1)
	case w.prev == "" && e.Hash != w.cr.VerifiedFrom.Hash:
		return f(e.Seq, "the entry at seq %d does not have the hash of the checkpoint verify started from", e.Seq)
	}
	return e, nil
}

// checkpointsAt holds every checkpoint at e's seq to e's hash and to the
// Merkle tree of the entries so far; e is on line num of file.
func (w *chainWalk) checkpointsAt(e Entry, file string, num int) *Failure {
	for _, c := range w.bySeq[e.Seq] {
		if c.cp.Hash != e.Hash {
			return w.failure(w.cf.checkpoints, c.line, e.Seq, "checkpoint hash does not match the hash of seq %d in %s line %d", e.Seq, file, num)
		}
		if err := w.tc.check(c.cp); err != nil {
			return &Failure{Chain: w.cf.chain, File: w.cf.checkpoints, Line: c.line, Seq: e.Seq, Reason: err.Error()}
		}
	}
	return nil
}

// endOfChain checks, once every entry is read, that no checkpoint names a
// seq past the end and that, with keys, a chain with entries has a signed
// checkpoint.
func (w *chainWalk) endOfChain(cps []cpLine, ring *keyRing) *Failure {
	cr, cf := &w.cr, w.cf
	for _, c := range cps {
		if c.cp.Seq > cr.LastSeq {
			return w.failure(cf.checkpoints, c.line, c.cp.Seq, "checkpoint at seq %d is beyond the end of the chain (last seq %d): entries are missing", c.cp.Seq, cr.LastSeq)
		}
	}
	switch {
	case ring.empty() || cr.Entries == 0:
	case len(cps) == 0:
		return w.failure(checkpointName(cf.chain), 0, 0, "no checkpoint: the chain's signatures cannot be checked")
	case cr.FirstSigned == nil:
		// Either signing was never configured for this chain, or someone
		// replaced its signed checkpoints: only a signature tells them apart.
		return w.failure(cf.checkpoints, 0, 0, "no signed checkpoint (%d unsigned): the chain's signatures cannot be checked", len(cps))
	}
	return nil
}

// tornFiles checks each torn file against the audit.recovery entry that
// recorded it, and marks that recovery's file present.
func (w *chainWalk) tornFiles() (*Failure, error) {
	cr := &w.cr
	for _, t := range w.cf.torn {
		i := -1
		for j, r := range cr.Recoveries {
			if r.TornFile == t.name {
				i = j
			}
		}
		if i < 0 && cr.VerifiedFrom != nil {
			continue // its audit.recovery entry may be before the part verified
		}
		if i < 0 {
			return w.failure(t.name, 0, 0, "torn file with no audit.recovery entry"), nil
		}
		data, err := fs.ReadFile(w.fsys, t.name)
		if err != nil {
			return nil, fmt.Errorf("read torn file: %w", err)
		}
		r := &cr.Recoveries[i]
		if int64(len(data)) != r.Length || sha256Hex(data) != r.SHA256 {
			return w.failure(t.name, 0, r.Seq, "torn file differs from what the audit.recovery entry at seq %d recorded", r.Seq), nil
		}
		r.Present = true
	}
	return nil, nil
}

// loadCheckpoints parses a chain's checkpoints file. A malformed line, a
// seq going backwards or (with keys) a bad signature or an unsigned
// checkpoint after a signed one is returned as fail, with the checkpoints
// read before it.
func loadCheckpoints(fsys fs.FS, cf *chainFiles, ring *keyRing) (cps []cpLine, fail *Failure, err error) {
	if cf.checkpoints == "" {
		return nil, nil, nil
	}
	var firstSigned cpLine // line 0: none yet
	err = eachLine(fsys, cf.checkpoints, func(num int, line []byte, complete bool) bool {
		f := func(seq int64, format string, args ...any) bool {
			fail = &Failure{Chain: cf.chain, File: cf.checkpoints, Line: num, Seq: seq, Reason: fmt.Sprintf(format, args...)}
			return false
		}
		if !complete {
			return f(0, "torn checkpoint line (no newline at end of file)")
		}
		cp, err := parseCheckpoint(line)
		if err != nil {
			return f(0, "malformed checkpoint: %v", err)
		}
		if cp.Chain != cf.chain {
			return f(cp.Seq, "checkpoint of chain %q in the checkpoints of chain %q", cp.Chain, cf.chain)
		}
		if n := len(cps); n > 0 && cp.Seq < cps[n-1].cp.Seq {
			return f(cp.Seq, "checkpoint seq goes back from %d", cps[n-1].cp.Seq)
		}
		if !ring.empty() {
			switch {
			case cp.Signature != "":
				if err := ring.check(cp); err != nil {
					return f(cp.Seq, "%v", err)
				}
				if err := ring.checkNote(cp); err != nil {
					return f(cp.Seq, "%v", err)
				}
			case firstSigned.line > 0:
				// A gateway with a key never writes an unsigned checkpoint;
				// signing is turned off only by changing its configuration.
				return f(cp.Seq, "unsigned checkpoint after signing began at checkpoint seq %d (line %d): "+
					"once a chain is signed every later checkpoint must be", firstSigned.cp.Seq, firstSigned.line)
			}
		}
		cps = append(cps, cpLine{cp: cp, line: num})
		if firstSigned.line == 0 && cp.Signature != "" {
			firstSigned = cps[len(cps)-1]
		}
		return true
	})
	return cps, fail, err
}

// eachLine calls fn for each line of the file name in fsys until fn
// returns false.
func eachLine(fsys fs.FS, path string, fn func(num int, line []byte, complete bool) bool) error {
	f, err := fsys.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return readLines(f, path, fn)
}

// readLines calls fn for each line read from r, the file name, until fn
// returns false.
func readLines(r io.Reader, name string, fn func(num int, line []byte, complete bool) bool) error {
	lr := newLineReader(r)
	for {
		line, complete, err := lr.line()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		if !fn(lr.num, line, complete) {
			return nil
		}
	}
}

// entries yields a chain's entries with their lines, in seq order, from
// where Verify started (end.VerifiedFrom's entry, else seq 1) up to and
// including end.LastSeq. The files are read again, so it checks that they
// still hold what was verified: each entry's hash, the seqs and links
// from the start, the start's hash and the end's; any difference is an
// error rather than an entry exported unverified.
func entries(fsys fs.FS, cf *chainFiles, end ChainReport, p *progress) iter.Seq2[lineEntry, error] {
	return func(yield func(lineEntry, error) bool) {
		from, upTo := end.VerifiedFrom, end.LastSeq
		segs, skip := fromSegment(cf.segments, from)
		next, prev := int64(1), GenesisHash
		if from != nil {
			next, prev = from.Seq, "" // the start's hash is checked instead of its link
		}
		changed := func(name string) { yield(lineEntry{}, fmt.Errorf("%s changed after it was verified", name)) }
		for _, seg := range segs {
			if seg.firstSeq > upTo {
				break
			}
			p.at(cf.chain, seg.name)
			bad, stopped := false, false
			err := eachLine(fsys, seg.name, func(num int, line []byte, complete bool) bool {
				if int64(num) <= skip {
					return true
				}
				e, err := parseOwnEntry(line)
				switch {
				case err != nil || !complete || e.Seq != next,
					prev != "" && e.PrevHash != prev,
					prev == "" && e.Hash != from.Hash,
					e.Seq == upTo && e.Hash != end.LastHash:
					bad = true
					return false
				}
				next, prev = e.Seq+1, e.Hash
				stopped = !yield(lineEntry{e: e, line: line}, nil) || e.Seq == upTo
				return !stopped
			})
			skip = 0
			switch {
			case err != nil:
				yield(lineEntry{}, err)
				return
			case bad:
				changed(seg.name)
				return
			case stopped:
				return
			}
		}
		if next <= upTo { // entries verified are gone
			changed(cf.chain + "'s segments")
		}
	}
}

type lineEntry struct {
	e    Entry
	line []byte // without its newline
}

func recoveryOf(e Entry) Recovery {
	var s struct {
		File     string `json:"file"`
		TornFile string `json:"torn_file"`
		Offset   int64  `json:"offset"`
		Length   int64  `json:"length"`
		SHA256   string `json:"sha256"`
	}
	_ = json.Unmarshal(e.Summary, &s) // a malformed summary leaves zero values, which no torn file matches
	return Recovery{Seq: e.Seq, File: s.File, TornFile: s.TornFile, Offset: s.Offset, Length: s.Length, SHA256: s.SHA256}
}
