package audit

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// follow drains f up to upTo in batches of n and returns the raw lines.
func follow(t *testing.T, f *Follower, upTo int64, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		lines, err := f.Next(upTo, n, 1<<20)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if len(lines) == 0 {
			return out
		}
		for _, l := range lines {
			out = append(out, l.Raw)
		}
	}
}

// A follower reads every entry exactly as the segments hold it, across
// rotations, in batches, and never past the durable seq it is given; a
// new follower started after an entry resumes right after it.
func TestFollowerReadsCommittedEntriesAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir, SegmentMaxBytes: 700, CheckpointInterval: -1})
	appendN(t, l, 7)
	if len(segments(t, dir, "gw-test")) < 3 {
		t.Fatal("want several segments for this test")
	}
	f := NewFollower(dir, "gw-test", 0, "")
	got := follow(t, f, 4, 3)
	if len(got) != 4 {
		t.Fatalf("read %d entries up to durable seq 4", len(got))
	}
	appendN(t, l, 5)
	got = append(got, follow(t, f, l.Durable(), 2)...)
	want := allLines(t, dir, "gw-test")
	if len(got) != len(want) || l.Durable() != 12 {
		t.Fatalf("read %d entries, the trail has %d (durable %d)", len(got), len(want), l.Durable())
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("entry %d differs from the trail:\n%s\n%s", i+1, got[i], want[i])
		}
	}
	var e Entry
	lines, _ := NewFollower(dir, "gw-test", 0, "").Next(6, 6, 1<<20)
	e = lines[5].Entry
	again := follow(t, NewFollower(dir, "gw-test", e.Seq, e.Hash), l.Durable(), 100)
	if len(again) != 6 || !bytes.Equal(again[0], want[6]) {
		t.Fatalf("resumed after seq 6: %d entries", len(again))
	}
}

// A follower refuses to go on from an entry the chain does not hold (a
// wrong hash, a seq beyond the end), and stops at a line whose hash does
// not match instead of passing it on.
func TestFollowerRefusesWhatItCannotVouchFor(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir, CheckpointInterval: -1})
	entries := appendN(t, l, 4)
	if _, err := NewFollower(dir, "gw-test", 2, entries[2].Hash).Next(4, 10, 1<<20); !errors.Is(err, ErrNotFollowing) {
		t.Fatalf("wrong hash for seq 2: %v", err)
	}
	if _, err := NewFollower(dir, "gw-test", 9, entries[3].Hash).Next(12, 10, 1<<20); !errors.Is(err, ErrNotFollowing) {
		t.Fatalf("seq beyond the chain: %v", err)
	}
	seg := segments(t, dir, "gw-test")[0]
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte(`"agent-a"`), []byte(`"agent-x"`), 2) // entries 1 and 3
	if err := os.WriteFile(seg, data, 0o640); err != nil {
		t.Fatal(err)
	}
	f := NewFollower(dir, "gw-test", 0, "")
	lines, err := f.Next(4, 10, 1<<20)
	if err == nil || len(lines) != 0 {
		t.Fatalf("a tampered entry was passed on: %d lines, %v", len(lines), err)
	}
	if _, err2 := f.Next(4, 10, 1<<20); err2 == nil {
		t.Fatal("the next call went past the tampered entry")
	}
}
