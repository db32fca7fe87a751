package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrNotFollowing is returned by Follower.Next when the chain on disk does
// not hold the entry the follower was started after (another chain under
// the same name, or a trail cut back): what follows it cannot be placed.
var ErrNotFollowing = errors.New("audit: the chain does not hold the entry to follow from")

// Line is one entry as the trail holds it: the exact bytes of its line
// (without the newline) and the entry they encode.
type Line struct {
	Raw   []byte
	Entry Entry
}

// Follower reads one chain's entries in seq order as they are committed,
// each checked as Verify checks it (its hash recomputed, its seq and
// prev_hash linking it to the entry before), for a reader that streams
// the trail elsewhere while the writer appends. It keeps its place in the
// current segment between calls, so following costs what is new. Not safe
// for concurrent use.
type Follower struct {
	dir, chain string
	next       int64  // the seq to read next
	prev       string // its prev_hash; "" when not known (a trail whose start is gone)
	seg        string // the segment being read; "" until placed
	off        int64  // where the next line starts in seg
	placed     bool
}

// NewFollower follows chain in dir after the entry afterSeq, whose hash is
// afterHash (seq 0 and "" follow from the chain's first entry).
func NewFollower(dir, chain string, afterSeq int64, afterHash string) *Follower {
	if afterSeq <= 0 {
		afterSeq, afterHash = 0, GenesisHash
	}
	return &Follower{dir: dir, chain: chain, next: afterSeq + 1, prev: afterHash}
}

// Next returns the next entries, at most maxEntries of them and about
// maxBytes (at least one), none beyond seq upTo: the writer's last
// durable entry, so a line written but not yet fsynced, which a failed
// write may still cut back, is never returned. A torn or half-written
// last line is left for a later call. An entry that does not parse, hash
// or link is an error, and stays one on every later call (the follower
// does not move past it): what follows a broken link cannot be vouched for.
func (f *Follower) Next(upTo int64, maxEntries int, maxBytes int64) ([]Line, error) {
	if f.next > upTo {
		return nil, nil
	}
	if !f.placed {
		if err := f.place(); err != nil {
			return nil, err
		}
		if !f.placed {
			return nil, nil
		}
	}
	var out []Line
	var size int64
	for len(out) < maxEntries && size < maxBytes && f.next <= upTo {
		lines, err := f.read(upTo, maxEntries-len(out), maxBytes-size)
		if err != nil {
			return out, err
		}
		for _, l := range lines {
			size += int64(len(l.Raw))
		}
		out = append(out, lines...)
		if len(lines) > 0 || f.next > upTo {
			continue
		}
		// Nothing more in this segment: the writer went on to the next
		// one (named after the seq we want) or has not written it yet.
		name := segmentName(f.chain, f.next)
		if _, err := os.Stat(join(f.dir, name)); err != nil {
			break
		}
		f.seg, f.off = name, 0
	}
	return out, nil
}

// place finds the segment holding f.next and the offset of its line,
// checking the entry before it against f.prev.
func (f *Follower) place() error {
	chains, err := scanDir(f.dir)
	if err != nil {
		return err
	}
	var segs []segmentFile
	for _, c := range chains {
		if c.chain == f.chain {
			segs = c.segments
		}
	}
	if len(segs) == 0 {
		return nil // nothing written yet
	}
	i := 0 // the last segment starting at or before f.next
	for j, s := range segs {
		if s.firstSeq <= f.next {
			i = j
		}
	}
	if segs[i].firstSeq > f.next {
		if f.next != 1 {
			return fmt.Errorf("%w: seq %d is not in the trail (its first segment starts at seq %d)", ErrNotFollowing, f.next-1, segs[i].firstSeq)
		}
		// The chain's start is gone (segments removed by hand): follow
		// from the first entry there is.
		f.next, f.prev = segs[i].firstSeq, ""
	}
	f.seg, f.off = segs[i].name, 0
	if segs[i].firstSeq == f.next {
		f.placed = true
		return nil
	}
	return f.skipTo()
}

// skipTo reads f.seg from its start up to the entry before f.next, which
// must have the hash f.prev.
func (f *Follower) skipTo() error {
	file, err := os.Open(join(f.dir, f.seg))
	if err != nil {
		return fmt.Errorf("follow audit chain: %w", err)
	}
	defer file.Close()
	lr := newLineReader(file)
	for {
		line, complete, err := lr.line()
		if err != nil || !complete {
			return fmt.Errorf("%w: seq %d is not in %s", ErrNotFollowing, f.next-1, f.seg)
		}
		e, err := parseOwnEntry(line)
		if err != nil {
			return fmt.Errorf("follow audit chain: %s line %d: %w", f.seg, lr.num, err)
		}
		if e.Seq == f.next-1 {
			if e.Hash != f.prev {
				return fmt.Errorf("%w: seq %d has hash %s, not %s", ErrNotFollowing, e.Seq, e.Hash, f.prev)
			}
			f.off, f.placed = lr.next, true
			return nil
		}
	}
}

// read returns the whole, checked lines of f.seg from f.off on, within
// the bounds, and moves past them.
func (f *Follower) read(upTo int64, maxEntries int, maxBytes int64) ([]Line, error) {
	file, err := os.Open(join(f.dir, f.seg))
	if err != nil {
		return nil, fmt.Errorf("follow audit chain: %w", err)
	}
	defer file.Close()
	if _, err := file.Seek(f.off, io.SeekStart); err != nil {
		return nil, fmt.Errorf("follow audit chain: %w", err)
	}
	r := bufio.NewReaderSize(file, 64<<10)
	var out []Line
	var size int64
	for len(out) < maxEntries && (len(out) == 0 || size < maxBytes) && f.next <= upTo {
		b, err := r.ReadBytes('\n')
		if len(b) == 0 || b[len(b)-1] != '\n' {
			if err != nil && !errors.Is(err, io.EOF) {
				return out, fmt.Errorf("follow audit chain: %w", err)
			}
			break // the end, or a line still being written
		}
		line := bytes.Clone(b[:len(b)-1])
		e, err := parseOwnEntry(line)
		switch {
		case err != nil:
			return out, fmt.Errorf("follow audit chain: %s at byte %d: %w", f.seg, f.off, err)
		case e.Chain != f.chain || e.Seq != f.next || (f.prev != "" && e.PrevHash != f.prev):
			return out, fmt.Errorf("follow audit chain: %s at byte %d: seq %d does not follow seq %d", f.seg, f.off, e.Seq, f.next-1)
		}
		out = append(out, Line{Raw: line, Entry: e})
		size += int64(len(line))
		f.off += int64(len(b))
		f.next, f.prev = e.Seq+1, e.Hash
	}
	return out, nil
}
