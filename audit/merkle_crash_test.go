package audit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// TestTreeCrashKill: a signing writer in a subprocess is killed with
// SIGKILL in the middle of a burst, three times; after each, Open restores
// the tree from the last checkpoint's compact range and the entries after
// it, and the root it then signs at Close is the RFC 6962 root recomputed
// from every line of the chain, and Verify agrees.
func TestTreeCrashKill(t *testing.T) {
	if dir := os.Getenv("AUDIT_TREE_CRASH_DIR"); dir != "" {
		treeCrashWriter(dir, os.Getenv("AUDIT_TREE_CRASH_KEY"))
		return
	}
	if testing.Short() {
		t.Skip("subprocess crash test")
	}
	dir, k := t.TempDir(), newKeyPair(t)
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTreeCrashKill$")
		cmd.Env = append(os.Environ(), "AUDIT_TREE_CRASH_DIR="+dir, "AUDIT_TREE_CRASH_KEY="+k.priv)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := 0
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if acked++; acked == 1500 {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		_ = cmd.Wait()
		if acked < 1500 {
			t.Fatalf("round %d: subprocess acknowledged only %d entries", round, acked)
		}
		l := openLog(t, Config{Dir: dir, Chain: "crash", SigningKeyFile: k.priv, CheckpointInterval: -1})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		lines := allLines(t, dir, "crash")
		root := mustRoot(t, must(LatestCheckpointNote(dir, "crash", -1)), k.pub)
		if !bytes.Equal(root, rfcMTH(lines)) {
			t.Fatalf("round %d: the signed root after recovery is not the root of the %d lines", round, len(lines))
		}
		if _, err := Verify(dir, k.pub); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		t.Logf("round %d: %d entries", round, len(lines))
	}
}

func treeCrashWriter(dir, key string) {
	l, err := Open(Config{Dir: dir, Chain: "crash", SigningKeyFile: key, CheckpointEvery: 200, Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				e, err := l.Append(context.Background(), rec(i))
				if err != nil {
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintln(w, e.Seq)
				_ = w.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestTreeResumeAcrossSegments: the state a crash leaves (the directory as
// it is while the log is open, every entry fsynced) with the entries after
// the last checkpoint spread over several segments: Open replays them all,
// and the root it signs is the RFC 6962 root of every line.
func TestTreeResumeAcrossSegments(t *testing.T) {
	dir, k := t.TempDir(), newKeyPair(t)
	l := openLog(t, Config{Dir: dir, SigningKeyFile: k.priv, SegmentMaxBytes: 2000, CheckpointEvery: 40, CheckpointInterval: -1})
	appendN(t, l, 97) // checkpoints at 40 and 80; 17 entries after, over several segments
	crashed := t.TempDir()
	for _, p := range segments(t, dir, "gw-test") {
		writeFile(t, filepath.Join(crashed, filepath.Base(p)), must(os.ReadFile(p)))
	}
	cps := must(os.ReadFile(filepath.Join(dir, checkpointName("gw-test"))))
	writeFile(t, filepath.Join(crashed, checkpointName("gw-test")), cps)
	if n := len(segments(t, crashed, "gw-test")); n < 4 {
		t.Fatalf("only %d segments: the test needs the replay to cross segments", n)
	}
	r := openLog(t, Config{Dir: crashed, SigningKeyFile: k.priv, CheckpointInterval: -1})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	lines := allLines(t, crashed, "gw-test")
	if len(lines) != 97 || !bytes.Equal(mustRoot(t, must(LatestCheckpointNote(crashed, "gw-test", -1)), k.pub), rfcMTH(lines)) {
		t.Fatalf("after resuming %d lines, the signed root is not the RFC 6962 root", len(lines))
	}
	if _, err := Verify(crashed, k.pub); err != nil {
		t.Fatal(err)
	}
}
