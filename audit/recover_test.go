package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestTornTailRecovery(t *testing.T) {
	lineOf := func(seq int64, prev string) []byte {
		p, _ := prepare(appendCanonicalString(nil, "gw-test"), Record{Kind: "k"})
		b, _ := p.appendLine(nil, seq, prev, time.Now())
		return b
	}
	for _, tc := range []struct {
		name    string
		garbage func(last Entry) []byte
	}{
		{"half line", func(last Entry) []byte { l := lineOf(last.Seq+1, last.Hash); return l[:len(l)/2] }},
		{"whole line without newline", func(last Entry) []byte { l := lineOf(last.Seq+1, last.Hash); return l[:len(l)-1] }},
		{"garbage line", func(Entry) []byte { return []byte("not json at all\n") }},
		{"zeros", func(Entry) []byte { return make([]byte, 300) }},
		{"bad hash", func(last Entry) []byte {
			return bytes.Replace(lineOf(last.Seq+1, last.Hash), []byte(`"kind":"k"`), []byte(`"kind":"x"`), 1)
		}},
		{"two torn lines", func(last Entry) []byte { return []byte("{\"seq\":\n{\"se") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Dir: dir, CheckpointEvery: -1}
			l := openLog(t, cfg)
			written := appendN(t, l, 5)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			seg := segments(t, dir, "gw-test")[0]
			good := must(os.ReadFile(seg))
			garbage := tc.garbage(written[4])
			if err := os.WriteFile(seg, append(bytes.Clone(good), garbage...), 0o640); err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(dir, nil); !IsFailure(err) {
				t.Fatalf("Verify before recovery: %v, want a failure", err)
			}

			l = openLog(t, cfg)
			e := appendN(t, l, 1)[0]
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			after := must(os.ReadFile(seg))
			if !bytes.HasPrefix(after, good) {
				t.Fatal("the good prefix was changed")
			}
			torn := tornName(seg, int64(len(good)))
			if got := must(os.ReadFile(torn)); !bytes.Equal(got, garbage) {
				t.Fatalf("torn file holds %q, want %q", got, garbage)
			}
			if e.Seq != 7 || e.PrevHash == written[4].Hash {
				t.Errorf("first append after recovery: seq %d (the recovery entry is 6)", e.Seq)
			}
			lines := allLines(t, dir, "gw-test")
			rec, err := parseEntry(lines[5])
			if err != nil || rec.Kind != KindRecovery {
				t.Fatalf("entry 6: %s (%v)", lines[5], err)
			}
			r := recoveryOf(rec)
			sum := sha256.Sum256(garbage)
			if r.TornFile != filepath.Base(torn) || r.Length != int64(len(garbage)) || r.SHA256 != hex.EncodeToString(sum[:]) || r.Offset != int64(len(good)) {
				t.Errorf("recovery = %+v", r)
			}
			rep := mustVerify(t, dir)
			if c := rep.Chains[0]; len(c.Recoveries) != 1 || !c.Recoveries[0].Present || c.Entries != 7 {
				t.Errorf("chain report %+v", c)
			}
		})
	}
}

func TestTornNewSegment(t *testing.T) {
	// A crash right after rotation: the new segment holds only a torn line.
	dir := t.TempDir()
	cfg := Config{Dir: dir, CheckpointEvery: -1}
	l := openLog(t, cfg)
	w := appendN(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(dir, segmentName("gw-test", 4))
	if err := os.WriteFile(next, []byte(`{"agent_id":"x","ch`), 0o640); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, cfg)
	e := appendN(t, l, 1)[0]
	if e.Seq != 5 {
		t.Errorf("seq %d, want 5", e.Seq)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := allLines(t, dir, "gw-test")
	rec := must(parseEntry(lines[3]))
	if rec.Kind != KindRecovery || rec.PrevHash != w[2].Hash {
		t.Errorf("entry 4 = %s", lines[3])
	}
	mustVerify(t, dir)
}

func TestTornCheckpointRecovery(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir}
	l := openLog(t, cfg)
	appendN(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, checkpointName("gw-test"))
	good := must(os.ReadFile(cp))
	f := must(os.OpenFile(cp, os.O_APPEND|os.O_WRONLY, 0))
	_, _ = f.WriteString(`{"chain":"gw-test","ha`)
	_ = f.Close()
	l = openLog(t, cfg)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(must(os.ReadFile(cp)), good) {
		t.Fatal("good checkpoints changed")
	}
	rep := mustVerify(t, dir)
	if c := rep.Chains[0]; len(c.Recoveries) != 1 || c.Recoveries[0].File != checkpointName("gw-test") || c.Checkpoints != 2 {
		t.Errorf("chain report %+v", c)
	}
}

func TestInterruptedRecoveryIsRecorded(t *testing.T) {
	// A crash after the torn bytes were moved aside and the segment cut, but
	// before the audit.recovery entry: the next Open records it.
	dir := t.TempDir()
	cfg := Config{Dir: dir, CheckpointEvery: -1}
	l := openLog(t, cfg)
	appendN(t, l, 2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segments(t, dir, "gw-test")[0]
	size := int64(len(must(os.ReadFile(seg))))
	if err := os.WriteFile(tornName(seg, size), []byte("torn bytes"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir, nil); !IsFailure(err) || !strings.Contains(err.Error(), "no audit.recovery entry") {
		t.Fatalf("Verify: %v", err)
	}
	l = openLog(t, cfg)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, dir)
	if c := rep.Chains[0]; len(c.Recoveries) != 1 || c.Recoveries[0].Length != 10 {
		t.Errorf("chain report %+v", c)
	}
}

func TestOpenRefusesCorruption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, dir, seg string)
		want   string
	}{
		{"edited line followed by valid lines", func(t *testing.T, dir, seg string) {
			data := must(os.ReadFile(seg))
			writeFile(t, seg, bytes.Replace(data, []byte(`"seq":2,`), []byte(`"seq":9,`), 1))
		}, "damaged but line"},
		// Zeros where entries were, as a block zeroed on disk (or a write
		// into space reserved in advance that did not land) would leave:
		// the entries after them are not a torn tail to move aside.
		{"zeroed bytes followed by valid lines", func(t *testing.T, dir, seg string) {
			data := must(os.ReadFile(seg))
			start := bytes.IndexByte(data, '\n') + 1
			end := start + bytes.IndexByte(data[start:], '\n')
			clear(data[start:end])
			writeFile(t, seg, data)
		}, "damaged but line"},
		{"line removed in the middle", func(t *testing.T, dir, seg string) {
			lines := bytes.SplitAfter(must(os.ReadFile(seg)), []byte("\n"))
			writeFile(t, seg, bytes.Join(append(lines[:1:1], lines[2:]...), nil))
		}, "does not continue"},
		{"last lines removed behind a checkpoint", func(t *testing.T, dir, seg string) {
			lines := bytes.SplitAfter(must(os.ReadFile(seg)), []byte("\n"))
			writeFile(t, seg, bytes.Join(lines[:3], nil))
		}, "entries are missing"},
		{"all segments removed", func(t *testing.T, dir, seg string) {
			if err := os.Remove(seg); err != nil {
				t.Fatal(err)
			}
		}, "entries are missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, Config{Dir: dir})
			appendN(t, l, 5)
			if err := l.Close(); err != nil { // writes a checkpoint at seq 5
				t.Fatal(err)
			}
			seg := filepath.Join(dir, segmentName("gw-test", 1))
			tc.tamper(t, dir, seg)
			before := snapshot(t, dir)
			_, err := Open(Config{Dir: dir, Chain: "gw-test", Logger: quietLogger()})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want ErrCorrupt %q", err, tc.want)
			}
			if after := snapshot(t, dir); after != before {
				t.Errorf("Open changed the directory:\n%s\n%s", before, after)
			}
		})
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

// snapshot names and hashes every file in dir except the lock.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	for _, de := range must(os.ReadDir(dir)) {
		if strings.HasSuffix(de.Name(), ".lock") {
			continue
		}
		fmt.Fprintf(&b, "%s %s\n", de.Name(), sha256Hex(must(os.ReadFile(filepath.Join(dir, de.Name())))))
	}
	return b.String()
}

// TestCrashKill runs a writer in a subprocess, kills it with SIGKILL in
// the middle of a burst, reopens the chain and checks that it verifies and
// holds every entry the subprocess saw acknowledged. In the lingering
// mode every append is an exchange in progress (Begin), so the writer
// holds batches open for the commit delay while appends queue without
// waking it, and the kill lands in a held batch as often as in an fsync.
func TestCrashKill(t *testing.T) {
	if dir := os.Getenv("AUDIT_CRASH_DIR"); dir != "" {
		crashWriter(dir, os.Getenv("AUDIT_CRASH_LINGER") != "")
		return
	}
	if testing.Short() {
		t.Skip("subprocess crash test")
	}
	for _, linger := range []bool{false, true} {
		t.Run(fmt.Sprintf("linger=%v", linger), func(t *testing.T) { crashKill(t, linger) })
	}
}

func crashKill(t *testing.T, linger bool) {
	dir := t.TempDir()
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill$")
		cmd.Env = append(os.Environ(), "AUDIT_CRASH_DIR="+dir)
		if linger {
			cmd.Env = append(cmd.Env, "AUDIT_CRASH_LINGER=1")
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := map[int64]string{}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			seq, _ := strconv.ParseInt(f[0], 10, 64)
			acked[seq] = f[1]
			if len(acked) == 2000 {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		_ = cmd.Wait()
		if len(acked) < 2000 {
			t.Fatalf("round %d: subprocess acknowledged only %d entries", round, len(acked))
		}
		l := openLog(t, Config{Dir: dir, Chain: "crash"})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		rep := mustVerify(t, dir)
		hashes := map[int64]string{}
		for _, line := range allLines(t, dir, "crash") {
			e := must(parseEntry(line))
			hashes[e.Seq] = e.Hash
		}
		for seq, h := range acked {
			if hashes[seq] != h {
				t.Fatalf("round %d: acknowledged seq %d (%s) is not in the chain", round, seq, h)
			}
		}
		t.Logf("round %d: %d acknowledged, %d in chain, recoveries %d", round, len(acked), rep.Entries, len(rep.Chains[0].Recoveries))
	}
}

func crashWriter(dir string, linger bool) {
	l, err := Open(Config{Dir: dir, Chain: "crash", CheckpointEvery: 500, CommitDelay: 2 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	if linger {
		// An exchange at its upstream, on and off: while it is open no
		// batch holds an entry of every exchange, so batches are held
		// until the delay; while it is closed, the append that completes
		// a batch wakes the writer.
		go func() {
			for {
				end := l.Begin()
				time.Sleep(3 * time.Millisecond)
				end()
				time.Sleep(3 * time.Millisecond)
			}
		}()
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				end := func() {}
				if linger {
					end = l.Begin()
				}
				e, err := l.Append(context.Background(), rec(i))
				end()
				if err != nil {
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintf(w, "%d %s\n", e.Seq, e.Hash)
				_ = w.Flush() // an entry counts as acknowledged once its line reached the parent
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
