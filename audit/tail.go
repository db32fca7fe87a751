package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Tail is the end of one chain as it is on disk: its last entries, each
// checked (its hash recomputed, its prev_hash and seq linking it to the
// entry before), and its last checkpoint compared with them. It is what the
// operator page shows of the trail: a bounded look at the recent end, read
// while the writer appends, not a replacement for Verify (which reads
// every entry from the first and checks signatures).
type Tail struct {
	Chain string
	// Entries are the last whole entries, oldest first; the line the
	// writer may be in the middle of writing is not one of them.
	Entries []Entry
	// Partial: older entries exist than the first of Entries (the read
	// was bounded); Entries then start mid-chain and the first one's
	// prev_hash could not be checked.
	Partial bool
	// Checkpoint is the chain's last checkpoint; nil when it has none yet.
	Checkpoint *Checkpoint
	// CheckpointChecked: the checkpoint's seq is one of Entries and its
	// hash is that entry's. False when the checkpoint is older than the
	// entries read (only Verify can compare it then).
	CheckpointChecked bool
	// Torn counts the files into which recoveries moved torn bytes.
	Torn int
	// Problem is the first inconsistency found (an entry whose hash does
	// not match, a broken link, a checkpoint that names another hash); ""
	// when there is none. Entries stop before it.
	Problem string
}

// ReadTail reads the last entries of chain in dir, about maxBytes of them
// (whole lines; at least the last entry), from the newest segment back
// through older ones until the bound. The checkpoints file is read first,
// so its last checkpoint is never newer than the entries read after it.
// A chain with no files yet has an empty Tail; an unreadable directory or
// file is an error.
func ReadTail(dir, chain string, maxBytes int64) (*Tail, error) {
	t := &Tail{Chain: chain}
	chains, err := scanDir(dir)
	if err != nil {
		return nil, err
	}
	var cf *chainFiles
	for _, c := range chains {
		if c.chain == chain {
			cf = c
		}
	}
	if cf == nil {
		return t, nil
	}
	t.Torn = len(cf.torn)
	if cf.checkpoints != "" {
		cp, err := lastCheckpoint(join(dir, cf.checkpoints))
		if err != nil {
			return nil, err
		}
		t.Checkpoint = cp
	}
	// Newest segment first; each read is prepended.
	budget := max(maxBytes, 1)
	var lines [][]byte
	for i := len(cf.segments) - 1; i >= 0 && budget > 0; i-- {
		seg, cut, err := readEnd(join(dir, cf.segments[i].name), budget, i == len(cf.segments)-1)
		if err != nil {
			return nil, err
		}
		budget -= int64(len(seg))
		lines = append(splitLines(seg), lines...)
		if cut || (i > 0 && budget <= 0) {
			// What is older was left out: the lines read stay contiguous.
			t.Partial = true
			break
		}
	}
	t.check(lines)
	return t, nil
}

// readEnd returns the last whole lines of path within limit bytes (at
// least one line, if the file has one), and whether earlier bytes were
// left out. In the newest segment a last line without its newline is the
// writer's current write, not yet a line, and is left out.
func readEnd(path string, limit int64, newest bool) (b []byte, cut bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("read audit tail: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("read audit tail: %w", err)
	}
	size := fi.Size()
	for {
		start := max(0, size-limit)
		b = make([]byte, size-start)
		if _, err := f.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
			return nil, false, fmt.Errorf("read audit tail: %w", err)
		}
		if newest {
			if i := bytes.LastIndexByte(b, '\n'); i < len(b)-1 {
				b = b[:i+1]
			}
		}
		if start > 0 {
			// The first line was cut by the bound: drop it.
			i := bytes.IndexByte(b, '\n')
			b = b[i+1:]
		}
		if len(b) > 0 || start == 0 {
			return b, start > 0, nil
		}
		// One line longer than the bound: read more rather than nothing.
		limit *= 2
	}
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i])
		b = b[i+1:]
	}
	return out
}

// check parses and links lines into t.Entries and compares the checkpoint.
func (t *Tail) check(lines [][]byte) {
	for _, line := range lines {
		e, err := parseOwnEntry(line)
		if err != nil {
			t.Problem = fmt.Sprintf("the entry after seq %d does not parse or hash: %v", t.lastSeq(), err)
			return
		}
		if e.Chain != t.Chain {
			t.Problem = fmt.Sprintf("seq %d names chain %q", e.Seq, e.Chain)
			return
		}
		if n := len(t.Entries); n > 0 {
			prev := t.Entries[n-1]
			if e.Seq != prev.Seq+1 || e.PrevHash != prev.Hash {
				t.Problem = fmt.Sprintf("seq %d does not follow seq %d (its prev_hash or seq breaks the chain)", e.Seq, prev.Seq)
				return
			}
		} else if e.Seq == 1 && e.PrevHash != GenesisHash {
			t.Problem = "seq 1 does not start from the genesis hash"
			return
		}
		t.Entries = append(t.Entries, e)
	}
	cp := t.Checkpoint
	if cp == nil || len(t.Entries) == 0 {
		return
	}
	first, last := t.Entries[0].Seq, t.lastSeq()
	switch {
	case cp.Seq > last:
		t.Problem = fmt.Sprintf("the last checkpoint (seq %d) is beyond the last entry (seq %d)", cp.Seq, last)
	case cp.Seq >= first:
		if e := t.Entries[cp.Seq-first]; e.Hash != cp.Hash {
			t.Problem = fmt.Sprintf("the last checkpoint names hash %s for seq %d, the entry has %s", cp.Hash, cp.Seq, e.Hash)
			return
		}
		t.CheckpointChecked = true
	}
}

func (t *Tail) lastSeq() int64 {
	if n := len(t.Entries); n > 0 {
		return t.Entries[n-1].Seq
	}
	return 0
}

// CheckpointTime is when the last checkpoint was written; zero without one.
func (t *Tail) CheckpointTime() time.Time {
	if t.Checkpoint == nil {
		return time.Time{}
	}
	at, _ := time.Parse(tsLayout, t.Checkpoint.TS)
	return at
}

// lastCheckpoint parses the last whole line of a checkpoints file (a torn
// last line is the writer's, or a crash's that recovery reports).
func lastCheckpoint(path string) (*Checkpoint, error) {
	b, _, err := readEnd(path, 4<<10, true)
	if err != nil {
		return nil, err
	}
	lines := splitLines(b)
	if len(lines) == 0 {
		return nil, nil
	}
	cp, err := parseCheckpoint(lines[len(lines)-1])
	if err != nil {
		return nil, fmt.Errorf("last checkpoint of %s: %w", path, err)
	}
	return &cp, nil
}
