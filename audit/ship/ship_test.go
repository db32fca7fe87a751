package ship

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
)

// A running gateway's closed segments and the checkpoints they cover go
// to the bucket, each with Content-MD5 (checked by the server) and its
// SHA-256, under retention; the segment being written waits until the
// final pass; a second pass, and a shipper without its cursor, upload
// nothing again; the bucket verifies as it stands, at each step.
func TestShipClosedSegmentsWithChecksumsOnce(t *testing.T) {
	srv := newS3(t)
	dir := t.TempDir()
	priv, pub := keys(t, t.TempDir())
	cfg := srv.config("prod")
	cfg.Retention = &Retention{Mode: "compliance", Days: 7}
	l := openChain(t, dir, "gw-0", priv)
	appendN(t, l, 23)

	s := mustNew(t, cfg, dir)
	if err := s.Pass(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "gw-0-*.jsonl"))
	if len(segs) < 3 {
		t.Fatalf("want several segments, have %d", len(segs))
	}
	puts := srv.putCounts()
	newest := filepath.Base(segs[len(segs)-1])
	if _, ok := puts["prod/gw-0/"+newest]; ok {
		t.Fatalf("the segment being written (%s) was shipped", newest)
	}
	for _, seg := range segs[:len(segs)-1] {
		key := "prod/gw-0/" + filepath.Base(seg)
		if puts[key] != 1 {
			t.Fatalf("%s uploaded %d times, want 1 (puts %v)", key, puts[key], puts)
		}
		data, _ := os.ReadFile(seg)
		md := md5.Sum(data)
		sh := sha256.Sum256(data)
		h := srv.headers[key]
		if h.Get("Content-MD5") != base64.StdEncoding.EncodeToString(md[:]) || h.Get("X-Amz-Meta-Sha256") != hex.EncodeToString(sh[:]) {
			t.Fatalf("%s: Content-MD5 %q, sha256 %q: not the file's", key, h.Get("Content-MD5"), h.Get("X-Amz-Meta-Sha256"))
		}
		if h.Get("X-Amz-Object-Lock-Mode") != "COMPLIANCE" || h.Get("X-Amz-Object-Lock-Retain-Until-Date") == "" {
			t.Fatalf("%s: no object lock retention in %v", key, h)
		}
		until, err := time.Parse(time.RFC3339, h.Get("X-Amz-Object-Lock-Retain-Until-Date"))
		if err != nil || until.Before(time.Now().Add(6*24*time.Hour)) {
			t.Fatalf("retain until %q: want 7 days from now", h.Get("X-Amz-Object-Lock-Retain-Until-Date"))
		}
	}
	rep, err := verifyFrom(t, cfg, pubKey(t, pub))
	if err != nil {
		t.Fatalf("the bucket mid-way does not verify: %v", err)
	}
	if want := segmentFirstSeq(newest) - 1; rep.Entries != want {
		t.Fatalf("mid-way the bucket has %d entries, want %d (all before the open segment)", rep.Entries, want)
	}
	if st := s.Stats(); st.BacklogFiles != 0 || st.LastSuccess.IsZero() {
		t.Fatalf("stats after a pass: %+v", st)
	}

	before := len(srv.putCounts())
	if err := s.Pass(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if after := srv.putCounts(); len(after) != before || sum(after) != before {
		t.Fatalf("a second pass uploaded again: %v", after)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Final(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep, err = verifyFrom(t, cfg, pubKey(t, pub))
	if err != nil || rep.Entries != 23 || len(Unfinished(rep)) != 0 {
		t.Fatalf("after the final pass: %d entries, unfinished %v, err %v", rep.Entries, Unfinished(rep), err)
	}

	// The cursor gone (a new disk, say): every object is compared, none
	// uploaded again.
	if err := os.Remove(filepath.Join(dir, cursorFile)); err != nil {
		t.Fatal(err)
	}
	n := sum(srv.putCounts())
	if err := mustNew(t, cfg, dir).Final(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := sum(srv.putCounts()); got != n {
		t.Fatalf("without its cursor the shipper uploaded %d objects again", got-n)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// A segment deleted from the bucket is named by verify --from.
func TestVerifyFromNamesDeletedSegment(t *testing.T) {
	srv := newS3(t)
	dir := t.TempDir()
	priv, pub := keys(t, t.TempDir())
	cfg := srv.config("p")
	l := openChain(t, dir, "gw-1", priv)
	appendN(t, l, 30)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mustNew(t, cfg, dir).Final(context.Background()); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "gw-1-*.jsonl"))
	victim := filepath.Base(segs[1])
	if _, err := srv.backend.DeleteObject(bucket, "p/gw-1/"+victim); err != nil {
		t.Fatal(err)
	}
	_, err := verifyFrom(t, cfg, pubKey(t, pub))
	var f *audit.Failure
	if !asFailure(err, &f) || !strings.Contains(f.Reason, victim) {
		t.Fatalf("want a failure naming %s, got %v", victim, err)
	}
}

// Two replicas that shut down cleanly and a sidecar whose pod vanished
// (the segments it had closed shipped, no final checkpoint) verify
// together; the sidecar is reported as stopped without a final checkpoint.
func TestVerifyFromFleet(t *testing.T) {
	srv := newS3(t)
	priv, pub := keys(t, t.TempDir())
	cfg := srv.config("fleet")
	for _, chain := range []string{"gateway-0", "gateway-1"} {
		dir := t.TempDir()
		l := openChain(t, dir, chain, priv)
		appendN(t, l, 12)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := mustNew(t, cfg, dir).Final(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	l := openChain(t, dir, "agent-x-sidecar", priv)
	appendN(t, l, 10) // checkpoints at 5 and 10
	s := mustNew(t, cfg, dir)
	_ = s.Pass(context.Background(), false)
	// More entries, no checkpoint, into new segments; a periodic pass
	// ships the closed ones; then the pod is gone (its log never closed
	// here: the directory is abandoned).
	for i := 0; i < 8; i++ {
		appendN(t, l, 1)
	}
	if err := s.Pass(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })

	rep, err := verifyFrom(t, cfg, pubKey(t, pub))
	if err != nil {
		t.Fatalf("fleet verify: %v", err)
	}
	if len(rep.Chains) != 3 {
		t.Fatalf("want 3 chains, got %d", len(rep.Chains))
	}
	un := Unfinished(rep)
	if len(un) != 1 || !strings.Contains(un[0], "agent-x-sidecar stopped without a final checkpoint") {
		t.Fatalf("unfinished: %v", un)
	}
}

// A storage that takes uploads and never answers cannot hold a stopping
// gateway past its deadline: Final returns when its context ends, and
// what it could not ship is the backlog.
func TestFinalKeepsItsDeadline(t *testing.T) {
	srv := newS3(t)
	srv.stall = func(string) bool { return true }
	dir := t.TempDir()
	l := openChain(t, dir, "gw-slow", "")
	appendN(t, l, 12)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	s := mustNew(t, srv.config("slow"), dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Final(ctx); err == nil {
		t.Fatal("Final succeeded against a storage that never answers")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Final took %s with a 1s deadline", took)
	}
	if st := s.Stats(); st.BacklogFiles == 0 || st.BacklogBytes == 0 || st.Errors != 1 || !st.LastSuccess.IsZero() {
		t.Fatalf("stats after a failed pass: %+v", st)
	}
}
