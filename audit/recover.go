package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// resume finds where the chain ends and moves aside whatever a crash left
// torn, without touching anything before it:
//
//  1. The checkpoints file and the last segment are read to their last
//     whole, valid line (each entry must also continue the seq and hash
//     chain of the one before it).
//  2. What follows that line is a torn tail only if no valid line follows
//     the damage: a crash can only tear the batch being written, while
//     damage followed by valid entries is corruption, and Open refuses it
//     (ErrCorrupt) rather than move acknowledged entries aside.
//  3. A checkpoint beyond the last entry means entries were removed:
//     ErrCorrupt, so the gateway never writes over a gap.
//  4. Each torn tail is copied to <file>.<offset>.torn (fsynced), the file
//     is cut back to the offset (fsynced), and an audit.recovery entry
//     records file, torn_file, offset, length and sha256 of the bytes.
//     A .torn file left by a crash between cutting and recording (its
//     offset is still the end of its file and no recovery entry names it)
//     is recorded now.
func (l *Log) resume() error {
	chains, err := scanDir(l.dir)
	if err != nil {
		return err
	}
	cf := &chainFiles{chain: l.chain}
	for _, c := range chains {
		if c.chain == l.chain {
			cf = c
		}
	}
	recorded := map[string]bool{} // torn files named by recovery entries in the last segment

	cpName := checkpointName(l.chain)
	cpTorn, treeCP, err := l.resumeCheckpoints(cf, cpName)
	if err != nil {
		return err
	}
	segF, segTorn, err := l.resumeSegment(cf, recorded)
	if err != nil {
		return err
	}
	if l.cp.Seq > l.seq {
		return fmt.Errorf("%w: checkpoint at seq %d but the chain ends at seq %d: entries are missing", ErrCorrupt, l.cp.Seq, l.seq)
	}
	return l.recordRecovery(cf, recorded, segF, segTorn, cpName, cpTorn, treeCP)
}

// resumeCheckpoints opens the chain's checkpoint file, if any, and reads
// the last checkpoint; it returns where a torn tail starts (-1: none) and
// the last checkpoint with a tree (nil: none), where the tree resumes.
func (l *Log) resumeCheckpoints(cf *chainFiles, cpName string) (int64, *Checkpoint, error) {
	cpTorn := int64(-1)
	var treeCP *Checkpoint // the last checkpoint with a tree
	if cf.checkpoints != "" {
		f, err := os.OpenFile(join(l.dir, cpName), os.O_RDWR|os.O_APPEND, 0)
		if err != nil {
			return -1, nil, fmt.Errorf("open checkpoints: %w", err)
		}
		l.cpFile = f
		if cpTorn, l.cpSize, err = scanTail(f, func(line []byte) (bool, error) {
			cp, err := parseCheckpoint(line)
			if err != nil {
				return false, err
			}
			if cp.Chain != l.chain || cp.Seq < l.cp.Seq {
				return true, fmt.Errorf("checkpoint of chain %q seq %d does not follow seq %d", cp.Chain, cp.Seq, l.cp.Seq)
			}
			l.cp = cp
			if cp.Merkle != nil {
				treeCP = &cp
			}
			return true, nil
		}); err != nil {
			return -1, nil, fmt.Errorf("%s: %w", cpName, err)
		}
	}
	return cpTorn, treeCP, nil
}

// resumeSegment opens the chain's last segment, if any, and reads the end
// of the chain (seq and hash) from it, or from the segment before when it
// holds no whole entry; the torn files its recovery entries name are
// marked in recorded. It returns the segment and where a torn tail starts
// (-1: none).
func (l *Log) resumeSegment(cf *chainFiles, recorded map[string]bool) (*os.File, int64, error) {
	segTorn := int64(-1)
	var segF *os.File
	if n := len(cf.segments); n > 0 {
		last := cf.segments[n-1]
		f, err := os.OpenFile(join(l.dir, last.name), os.O_RDWR|os.O_APPEND, 0)
		if err != nil {
			return nil, -1, fmt.Errorf("open segment: %w", err)
		}
		segF, l.f, l.segName = f, f, last.name
		seq, prev, count := last.firstSeq-1, "", 0
		if last.firstSeq == 1 {
			prev = GenesisHash
		}
		if segTorn, l.segSize, err = scanTail(f, func(line []byte) (bool, error) {
			e, err := parseOwnEntry(line)
			if err != nil {
				return false, err
			}
			if e.Chain != l.chain || e.Seq != seq+1 || (prev != "" && e.PrevHash != prev) {
				return true, fmt.Errorf("entry seq %d does not continue seq %d", e.Seq, seq)
			}
			seq, prev = e.Seq, e.Hash
			count++
			if e.Kind == KindRecovery {
				var s struct {
					TornFile string `json:"torn_file"`
				}
				if json.Unmarshal(e.Summary, &s) == nil {
					recorded[s.TornFile] = true
				}
			}
			return true, nil
		}); err != nil {
			return nil, -1, fmt.Errorf("%s: %w", last.name, err)
		}
		if count == 0 { // the last segment holds no whole entry: resume from the one before
			prev = GenesisHash
			if n > 1 {
				if seq, prev, err = lastEntry(join(l.dir, cf.segments[n-2].name)); err != nil {
					return nil, -1, err
				}
			}
			if seq+1 != last.firstSeq {
				return nil, -1, fmt.Errorf("%w: %s should start at seq %d", ErrCorrupt, last.name, seq+1)
			}
		}
		l.seq, l.prev = seq, prev
	}
	return segF, segTorn, nil
}

// recordRecovery moves the torn tails aside and writes a recovery entry
// for each, and for every torn file of an earlier run that no entry names
// yet.
func (l *Log) recordRecovery(cf *chainFiles, recorded map[string]bool, segF *os.File, segTorn int64, cpName string, cpTorn int64, treeCP *Checkpoint) error {
	var recs []*Object
	if segTorn >= 0 {
		rec, err := l.moveAside(segF, l.segName, segTorn)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
	}
	if cpTorn >= 0 {
		rec, err := l.moveAside(l.cpFile, cpName, cpTorn)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
	}
	for _, r := range recs {
		recorded[r.Text("torn_file")] = true
	}
	if err := l.resumeTree(cf, treeCP); err != nil {
		return err
	}
	for _, t := range cf.torn {
		if recorded[t.name] {
			continue
		}
		if (t.source == l.segName && t.offset == l.segSize) || (t.source == cpName && t.offset == l.cpSize) {
			rec, err := l.recordTorn(t)
			if err != nil {
				return err
			}
			recs = append(recs, rec)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	reqs := make([]*request, 0, len(recs))
	for _, r := range recs {
		p, err := prepare(l.chainJSON, Record{Kind: KindRecovery, Object: r})
		if err != nil {
			return err
		}
		reqs = append(reqs, &request{p: p})
	}
	return l.write(reqs)
}

// scanTail reads f line by line through accept until a line is rejected.
// It returns where the torn tail starts (-1 if the file ends with an
// accepted line) and the size of the good prefix. accept returns
// whole=true with an error for a line that is intact but out of place:
// that is corruption, not a torn write, and so is damage followed by a
// line accept would take.
func scanTail(f *os.File, accept func(line []byte) (whole bool, err error)) (tornAt, good int64, err error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, 0, err
	}
	lr := newLineReader(f)
	for {
		line, complete, err := lr.line()
		if errors.Is(err, io.EOF) {
			return -1, good, nil
		}
		if err != nil {
			return 0, 0, err
		}
		var whole bool
		if complete {
			whole, err = accept(line)
			if err == nil {
				good = lr.next
				continue
			}
		}
		if whole {
			return 0, 0, fmt.Errorf("%w: line %d: %w", ErrCorrupt, lr.num, err)
		}
		tornAt, tornLine := lr.offset, lr.num
		for {
			line, complete, err := lr.line()
			if errors.Is(err, io.EOF) {
				return tornAt, good, nil
			}
			if err != nil {
				return 0, 0, err
			}
			if whole, err := accept(line); complete && (err == nil || whole) {
				return 0, 0, fmt.Errorf("%w: line %d is damaged but line %d after it is valid", ErrCorrupt, tornLine, lr.num)
			}
		}
	}
}

// lastEntry returns the seq and hash of the last entry of a segment that is
// not the last one (so it must end with a whole, valid entry).
func lastEntry(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", fmt.Errorf("open segment: %w", err)
	}
	defer f.Close()
	lr := newLineReader(f)
	var e Entry
	for {
		line, complete, err := lr.line()
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil && !complete {
			err = errors.New("no newline at end")
		}
		if err == nil {
			e, err = parseOwnEntry(line)
		}
		if err != nil {
			return 0, "", fmt.Errorf("%w: %s line %d: %w", ErrCorrupt, path, lr.num, err)
		}
	}
	if e.Seq == 0 {
		return 0, "", fmt.Errorf("%w: %s is empty", ErrCorrupt, path)
	}
	return e.Seq, e.Hash, nil
}

// moveAside copies f's bytes from off to its end into <name>.<off>.torn,
// then cuts f back to off. Both steps are fsynced, in that order, so the
// bytes exist somewhere at every moment.
func (l *Log) moveAside(f *os.File, name string, off int64) (*Object, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil {
		return nil, fmt.Errorf("read torn tail of %s: %w", name, err)
	}
	torn := tornName(name, off)
	if err := writeSynced(join(l.dir, torn), data); err != nil {
		return nil, fmt.Errorf("move torn tail of %s aside: %w", name, err)
	}
	if err := f.Truncate(off); err != nil {
		return nil, fmt.Errorf("truncate %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("fsync %s: %w", name, err)
	}
	l.log.Warn("audit: torn tail moved aside", "file", name, "offset", off, "bytes", len(data), "torn_file", torn)
	return recovery(name, torn, off, data), nil
}

// recordTorn builds the recovery record for a .torn file whose recovery
// entry a crash prevented.
func (l *Log) recordTorn(t tornFile) (*Object, error) {
	data, err := os.ReadFile(join(l.dir, t.name))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.name, err)
	}
	l.log.Warn("audit: recording torn file left by an interrupted recovery", "torn_file", t.name)
	return recovery(t.source, t.name, t.offset, data), nil
}

func recovery(file, torn string, off int64, data []byte) *Object {
	sum := sha256.Sum256(data)
	o := &Object{}
	o.Str("file", file)
	o.Str("torn_file", torn)
	o.Int("offset", off)
	o.Int("length", int64(len(data)))
	o.Str("sha256", hex.EncodeToString(sum[:]))
	return o
}

// writeSynced writes a file and its directory entry durably.
func writeSynced(path string, data []byte) error {
	if err := writeFileSync(path, data, os.O_TRUNC, 0o640); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// ReplaceFile replaces the file at path with data, atomically and
// durably: written beside it (path+".tmp"), fsynced, renamed over it, the
// directory fsynced; a crash leaves the old file or the new one, never a
// torn one. The shipper and the SIEM stream keep their cursors this way.
func ReplaceFile(path string, data []byte) error {
	tmp := path + ".tmp"
	err := writeFileSync(tmp, data, os.O_TRUNC, 0o640)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// writeFileSync creates (flag: O_EXCL or O_TRUNC) and fsyncs a file.
func writeFileSync(path string, data []byte, flag int, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|flag, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
