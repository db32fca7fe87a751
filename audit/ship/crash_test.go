package ship

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The helper process: ships SHIP_HELPER_DIR to SHIP_HELPER_ENDPOINT and
// exits; TestShipResumesAfterKill kills it mid-upload.
func TestShipHelperProcess(t *testing.T) {
	dir, endpoint := os.Getenv("SHIP_HELPER_DIR"), os.Getenv("SHIP_HELPER_ENDPOINT")
	if dir == "" {
		t.Skip("run by TestShipResumesAfterKill")
	}
	cfg := Config{URL: "s3://" + bucket + "/crash", Endpoint: endpoint, AccessKeyID: "test", SecretAccessKey: "test-secret", PathStyle: true}
	cfg.Validate()
	s, err := New(cfg, dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Final(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// kill -9 in the middle of an upload: the restarted shipper ships the
// rest, and every object is stored exactly once (none uploaded twice,
// none missing), the bucket verifying end to end.
func TestShipResumesAfterKill(t *testing.T) {
	srv := newS3(t)
	dir := t.TempDir()
	priv, pub := keys(t, t.TempDir())
	l := openChain(t, dir, "gw-crash", priv)
	appendN(t, l, 40)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "gw-crash-*.jsonl"))
	if len(segs) < 5 {
		t.Fatalf("want at least 5 segments, have %d", len(segs))
	}
	victim := "crash/gw-crash/" + filepath.Base(segs[3])
	stalled := make(chan struct{})
	srv.mu.Lock()
	srv.stall = func(key string) bool {
		if key != victim {
			return false
		}
		close(stalled)
		srv.stall = nil
		return true
	}
	srv.mu.Unlock()

	run := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestShipHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SHIP_HELPER_DIR="+dir, "SHIP_HELPER_ENDPOINT="+srv.URL)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd
	}
	first := run()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stalled:
	case <-time.After(30 * time.Second):
		_ = first.Process.Kill()
		t.Fatal("the helper never reached the upload to kill it in")
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	before := srv.putCounts()
	if before[victim] != 0 || len(before) != 3 {
		t.Fatalf("before the kill: want the 3 segments before %s stored, have %v", victim, before)
	}

	if err := run().Run(); err != nil {
		t.Fatalf("the restarted shipper: %v", err)
	}
	after := srv.putCounts()
	for _, seg := range segs {
		if key := "crash/gw-crash/" + filepath.Base(seg); after[key] != 1 {
			t.Fatalf("%s stored %d times, want exactly once (%v)", key, after[key], after)
		}
	}
	for key, n := range after {
		if n != 1 {
			t.Fatalf("%s stored %d times", key, n)
		}
	}
	cfg := srv.config("crash")
	rep, err := verifyFrom(t, cfg, pubKey(t, pub))
	if err != nil || rep.Entries != 40 || len(Unfinished(rep)) != 0 {
		t.Fatalf("after the restart: %d entries, unfinished %v, err %v", rep.Entries, Unfinished(rep), err)
	}
}
