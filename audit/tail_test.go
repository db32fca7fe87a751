package audit

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The tail of a sound chain: the last entries in order, linked, with the
// last checkpoint found among them.
func TestReadTailSoundChain(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir, CheckpointEvery: 10, CheckpointInterval: -1})
	want := appendN(t, l, 25)

	tail, err := ReadTail(dir, "gw-test", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if tail.Problem != "" || tail.Partial || len(tail.Entries) != 25 {
		t.Fatalf("whole chain: problem %q partial %v, %d entries", tail.Problem, tail.Partial, len(tail.Entries))
	}
	if last := tail.Entries[24]; last.Seq != 25 || last.Hash != want[24].Hash {
		t.Fatalf("last entry %+v, want seq 25 %s", last, want[24].Hash)
	}
	if tail.Checkpoint == nil || tail.Checkpoint.Seq != 20 || !tail.CheckpointChecked || tail.CheckpointTime().IsZero() {
		t.Fatalf("checkpoint %+v checked %v", tail.Checkpoint, tail.CheckpointChecked)
	}

	// Bounded: only the newest entries, marked partial; the checkpoint
	// older than them is not compared (and is no problem).
	line := int64(len(allLines(t, dir, "gw-test")[0]) + 1)
	tail, err = ReadTail(dir, "gw-test", 3*line)
	if err != nil {
		t.Fatal(err)
	}
	if !tail.Partial || len(tail.Entries) < 2 || len(tail.Entries) > 4 || tail.Entries[len(tail.Entries)-1].Seq != 25 || tail.Problem != "" || tail.CheckpointChecked {
		t.Fatalf("bounded: partial %v, %d entries, problem %q, checked %v", tail.Partial, len(tail.Entries), tail.Problem, tail.CheckpointChecked)
	}

	// A bound smaller than one line still yields the last entry.
	tail, err = ReadTail(dir, "gw-test", 10)
	if err != nil || len(tail.Entries) != 1 || tail.Entries[0].Seq != 25 {
		t.Fatalf("tiny bound: %v %+v", err, tail)
	}
}

// The tail crosses segment files back to the bound.
func TestReadTailAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir, SegmentMaxBytes: 2 << 10, CheckpointEvery: -1, CheckpointInterval: -1})
	appendN(t, l, 40)
	if n := len(segments(t, dir, "gw-test")); n < 3 {
		t.Fatalf("%d segments, want several", n)
	}
	tail, err := ReadTail(dir, "gw-test", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if tail.Problem != "" || tail.Partial || len(tail.Entries) != 40 || tail.Entries[0].Seq != 1 || tail.Checkpoint != nil {
		t.Fatalf("problem %q partial %v, %d entries from %d", tail.Problem, tail.Partial, len(tail.Entries), tail.Entries[0].Seq)
	}
	tail, err = ReadTail(dir, "gw-test", 3<<10)
	if err != nil || !tail.Partial || tail.Problem != "" || tail.Entries[len(tail.Entries)-1].Seq != 40 || len(tail.Entries) >= 40 {
		t.Fatalf("bounded across segments: %v partial %v problem %q", err, tail.Partial, tail.Problem)
	}
}

// A line the writer has not finished is not an entry yet; an edited entry
// or a checkpoint naming another hash is a problem.
func TestReadTailProblems(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir, CheckpointEvery: -1, CheckpointInterval: -1})
	appendN(t, l, 5)
	if err := l.Close(); err != nil { // writes a checkpoint of seq 5
		t.Fatal(err)
	}
	seg := segments(t, dir, "gw-test")[0]
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}

	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(seg, b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	write(append(bytes.Clone(data), `{"agent_id":"half a li`...))
	tail, err := ReadTail(dir, "gw-test", 1<<20)
	if err != nil || tail.Problem != "" || len(tail.Entries) != 5 || !tail.CheckpointChecked {
		t.Fatalf("unfinished last line: %v problem %q, %d entries", err, tail.Problem, len(tail.Entries))
	}

	write(bytes.Replace(data, []byte(`"i":3`), []byte(`"i":9`), 1))
	tail, err = ReadTail(dir, "gw-test", 1<<20)
	if err != nil || !strings.Contains(tail.Problem, "after seq 3") || len(tail.Entries) != 3 {
		t.Fatalf("edited entry: %v problem %q, %d entries", err, tail.Problem, len(tail.Entries))
	}

	// Drop the last entry: the checkpoint of seq 5 is beyond the chain.
	lines := bytes.SplitAfter(data, []byte("\n"))
	write(bytes.Join(lines[:4], nil))
	tail, err = ReadTail(dir, "gw-test", 1<<20)
	if err != nil || !strings.Contains(tail.Problem, "beyond the last entry") {
		t.Fatalf("missing entry: %v problem %q", err, tail.Problem)
	}

	// Swap the last entry for another chain's seq 5 of different content.
	other := t.TempDir()
	ol := openLog(t, Config{Dir: other, CheckpointEvery: -1, CheckpointInterval: -1})
	appendN(t, ol, 4)
	if _, err := ol.Append(t.Context(), Record{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	olines := allLines(t, other, "gw-test")
	write(append(bytes.Join(lines[:4], nil), append(olines[4], '\n')...))
	tail, err = ReadTail(dir, "gw-test", 1<<20)
	if err != nil || !strings.Contains(tail.Problem, "does not follow seq 4") {
		t.Fatalf("foreign entry: %v problem %q", err, tail.Problem)
	}
}

func TestReadTailEmpty(t *testing.T) {
	tail, err := ReadTail(t.TempDir(), "gw-test", 1<<20)
	if err != nil || len(tail.Entries) != 0 || tail.Checkpoint != nil || tail.Problem != "" {
		t.Fatalf("empty dir: %v %+v", err, tail)
	}
	if _, err := ReadTail("/nonexistent/audit", "gw-test", 1<<20); err == nil {
		t.Fatal("no error for a missing directory")
	}
}
