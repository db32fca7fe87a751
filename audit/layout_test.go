package audit

import (
	"bytes"
	"os"
	"testing"
)

// A chain read while its gateway writes it ends at the last acknowledged
// entry: `audit verify`, the operator page's tail and a follower all read
// every segment to its end, so a segment holds exactly its entries' lines,
// with nothing (no preallocated or zero-filled space) after the last one.
func TestLiveChainEndsAtItsLastEntry(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir, SegmentMaxBytes: 4 << 10, CheckpointEvery: -1})
	written := appendN(t, l, 40)
	last := written[len(written)-1]

	segs := segments(t, dir, "gw-test")
	if len(segs) < 3 {
		t.Fatalf("%d segments, want rotations at 4KB", len(segs))
	}
	for _, seg := range segs {
		data := must(os.ReadFile(seg))
		if len(data) == 0 || data[len(data)-1] != '\n' || bytes.IndexByte(data, 0) >= 0 {
			t.Errorf("%s (%d bytes) does not end with its last entry's newline", seg, len(data))
		}
	}

	rep := mustVerify(t, dir)
	if rep.Entries != int64(len(written)) {
		t.Errorf("verify of the live chain: %d entries, want %d", rep.Entries, len(written))
	}
	tail, err := ReadTail(dir, "gw-test", 1<<20)
	if err != nil || tail.Problem != "" || len(tail.Entries) != len(written) || tail.lastSeq() != last.Seq {
		t.Errorf("tail of the live chain: %d entries to seq %d, problem %q, err %v", len(tail.Entries), tail.lastSeq(), tail.Problem, err)
	}
	lines, err := NewFollower(dir, "gw-test", 0, "").Next(l.Durable(), 1000, 1<<20)
	if err != nil || len(lines) != len(written) || lines[len(lines)-1].Entry.Hash != last.Hash {
		t.Errorf("follower of the live chain: %d lines, err %v", len(lines), err)
	}
}
