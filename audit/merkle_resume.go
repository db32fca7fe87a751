package audit

import (
	"fmt"
	"os"
	"time"
)

// resumeTree restores the chain's Merkle tree at Open: from the compact
// range of the last checkpoint with a tree (last), replaying the entries
// written after it, so a crash costs at most the entries since that
// checkpoint to rehash. A chain with entries and no tree yet (written
// before trees existed) starts one after its last entry, marked by a
// checkpoint of size 0 there; entries before it verify by the hash chain.
func (l *Log) resumeTree(cf *chainFiles, last *Checkpoint) error {
	if last == nil {
		l.tree = newTree(l.seq + 1)
		if l.seq == 0 {
			return nil
		}
		cp := Checkpoint{Chain: l.chain, Seq: l.seq, Hash: l.prev, TS: time.Now().UTC().Format(tsLayout)}
		cp = signCheckpoint(l.withTree(cp), l.key)
		if err := l.writeCheckpoint(cp); err != nil {
			return fmt.Errorf("mark the start of the Merkle tree: %w", err)
		}
		l.cp = cp
		l.log.Info("audit: Merkle tree starts after the last entry", "start_seq", l.seq+1)
		return nil
	}
	t, err := treeOf(*last.Merkle)
	if err != nil {
		return fmt.Errorf("%w: checkpoint at seq %d: %w", ErrCorrupt, last.Seq, err)
	}
	err = eachEntryLine(l.dir, cf.segments, last.Seq+1, l.seq, func(_ int64, line []byte) error {
		t.add(leafHash(line))
		return nil
	})
	if err != nil {
		return fmt.Errorf("replay the Merkle tree from seq %d: %w", last.Seq+1, err)
	}
	l.tree = t
	return nil
}

// eachEntryLine calls fn with each entry line (without its newline) of
// seqs from..to of the segments, in order, checking each entry's hash and
// that the seqs run without a gap.
func eachEntryLine(dir string, segs []segmentFile, from, to int64, fn func(seq int64, line []byte) error) error {
	if from > to {
		return nil
	}
	i := len(segs) - 1
	for i > 0 && segs[i].firstSeq > from {
		i--
	}
	if i < 0 || segs[i].firstSeq > from {
		return fmt.Errorf("%w: no segment holds seq %d", ErrCorrupt, from)
	}
	next := from
	for _, seg := range segs[i:] {
		if next > to {
			break
		}
		var ferr error
		err := eachLine(os.DirFS(dir), seg.name, func(num int, line []byte, complete bool) bool {
			seq := seg.firstSeq + int64(num) - 1
			if seq < next {
				return true
			}
			if seq > to {
				return false
			}
			e, err := parseOwnEntry(line)
			switch {
			case seq != next:
				ferr = fmt.Errorf("%w: %s starts at seq %d, expected seq %d", ErrCorrupt, seg.name, seq, next)
			case !complete:
				ferr = fmt.Errorf("%w: %s line %d is torn", ErrCorrupt, seg.name, num)
			case err != nil:
				ferr = fmt.Errorf("%w: %s line %d: %w", ErrCorrupt, seg.name, num, err)
			case e.Seq != seq:
				ferr = fmt.Errorf("%w: %s line %d has seq %d, expected %d", ErrCorrupt, seg.name, num, e.Seq, seq)
			default:
				ferr = fn(seq, line)
			}
			next = seq + 1
			return ferr == nil
		})
		if err == nil {
			err = ferr
		}
		if err != nil {
			return err
		}
	}
	if next <= to {
		return fmt.Errorf("%w: the chain ends at seq %d, before seq %d", ErrCorrupt, next-1, to)
	}
	return nil
}
