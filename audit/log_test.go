package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

// recompute is an independent verifier: it decodes each line generically,
// drops "hash", canonicalizes with jcs and checks hash, seq and prev_hash.
func recompute(t *testing.T, lines [][]byte) {
	t.Helper()
	prev := strings.Repeat("0", 64)
	for i, line := range lines {
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if len(m) != 11 {
			t.Errorf("line %d has %d fields, want 11", i+1, len(m))
		}
		hash, _ := m["hash"].(string)
		delete(m, "hash")
		raw, _ := json.Marshal(m)
		canon, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(canon)
		if got := hex.EncodeToString(sum[:]); got != hash {
			t.Errorf("line %d: hash %s, recomputed %s", i+1, hash, got)
		}
		if m["prev_hash"] != prev {
			t.Errorf("line %d: prev_hash %v, want %s", i+1, m["prev_hash"], prev)
		}
		if m["seq"] != json.Number(fmt.Sprint(i+1)) {
			t.Errorf("line %d: seq %v", i+1, m["seq"])
		}
		if ts, err := time.Parse(time.RFC3339Nano, m["ts"].(string)); err != nil || ts.Location() != time.UTC {
			t.Errorf("line %d: ts %v (%v)", i+1, m["ts"], err)
		}
		prev = hash
	}
}

func TestAppendChain(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir})
	records := []Record{
		{Kind: KindLLMRequest, AgentID: "claude-3", SessionID: "s", RequestID: "r1",
			PayloadSHA256: strings.Repeat("ab", 32), Object: Members("model", "gpt-4o", "checks", map[string]any{"auth": "pass"})},
		{Kind: KindLLMResponse, AgentID: "claude-3", RequestID: "r1", Object: Members("tokens", map[string]any{"total": 42}, "thought", "é \"x\" <&>")},
		{Kind: KindAuthFailure},
		{Kind: KindConfigReload, Object: Members("ok", true, "latency_ms", 1.25)},
	}
	var got []Entry
	for _, r := range records {
		e, err := l.Append(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := allLines(t, dir, "gw-test")
	if len(lines) != len(records) {
		t.Fatalf("%d lines, want %d", len(lines), len(records))
	}
	recompute(t, lines)
	for i, e := range got {
		if e.Seq != int64(i+1) || e.Chain != "gw-test" || e.Kind != records[i].Kind {
			t.Errorf("entry %d = %+v", i, e)
		}
		if !bytes.Contains(lines[i], []byte(`"hash":"`+e.Hash+`"`)) {
			t.Errorf("entry %d: returned hash not in line", i)
		}
	}
	if string(got[2].Summary) != "{}" {
		t.Errorf("nil summary written as %s", got[2].Summary)
	}
	rep := mustVerify(t, dir)
	if rep.Entries != 4 || rep.Chains[0].LastHash != got[3].Hash {
		t.Errorf("report %+v", rep)
	}
}

func TestConcurrentAppends(t *testing.T) {
	for _, tc := range []struct {
		name                string
		writers, perWriter  int
		segMax              int64
		wantSegmentsAtLeast int
	}{
		{"64x50", 64, 50, 0, 1},
		{"1000x3", 1000, 3, 0, 1},
		{"64x20 rotating", 64, 20, 16 << 10, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, Config{Dir: dir, SegmentMaxBytes: tc.segMax})
			var wg sync.WaitGroup
			var mu sync.Mutex
			seen := map[int64]string{}
			for w := 0; w < tc.writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < tc.perWriter; i++ {
						e, err := l.Append(context.Background(), rec(w*tc.perWriter+i))
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						seen[e.Seq] = e.Hash
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			st := l.Stats()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			n := tc.writers * tc.perWriter
			if len(seen) != n || st.Entries != uint64(n) {
				t.Fatalf("%d distinct seqs, %d entries, want %d", len(seen), st.Entries, n)
			}
			if st.Fsyncs >= uint64(n) {
				t.Errorf("%d fsyncs for %d entries: no group commit", st.Fsyncs, n)
			}
			rep := mustVerify(t, dir)
			if rep.Entries != int64(n) || rep.Chains[0].LastHash != seen[int64(n)] {
				t.Errorf("verify: %d entries, last %s", rep.Entries, rep.Chains[0].LastHash)
			}
			if got := len(segments(t, dir, "gw-test")); got < tc.wantSegmentsAtLeast {
				t.Errorf("%d segments, want >= %d", got, tc.wantSegmentsAtLeast)
			}
			recompute(t, allLines(t, dir, "gw-test"))
			t.Logf("%d entries, %d fsyncs, %d segments", n, st.Fsyncs, len(segments(t, dir, "gw-test")))
		})
	}
}

func TestRotationAndReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, SegmentMaxBytes: 1024, CheckpointEvery: -1}
	l := openLog(t, cfg)
	first := appendN(t, l, 20)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, dir, "gw-test")
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	for _, p := range segs {
		fi, _ := os.Stat(p)
		lines := bytes.Count(must(os.ReadFile(p)), []byte("\n"))
		if fi.Size() > 1024 && lines > 1 {
			t.Errorf("%s: %d bytes over the limit with %d lines", p, fi.Size(), lines)
		}
		e, err := parseEntry(bytes.SplitN(must(os.ReadFile(p)), []byte("\n"), 2)[0])
		if err != nil || filepath.Base(p) != segmentName("gw-test", e.Seq) {
			t.Errorf("%s: first entry seq %d (%v)", p, e.Seq, err)
		}
	}
	l = openLog(t, cfg)
	e, err := l.Append(context.Background(), rec(0))
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 21 || e.PrevHash != first[19].Hash {
		t.Errorf("after reopen: seq %d prev %s, want 21 %s", e.Seq, e.PrevHash, first[19].Hash)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	recompute(t, allLines(t, dir, "gw-test"))
	if rep := mustVerify(t, dir); rep.Entries != 21 {
		t.Errorf("entries %d", rep.Entries)
	}
}

func TestCloseAndAppendAfterClose(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir})
	appendN(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := l.Append(context.Background(), rec(0))
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if l.Stats().Lost != 1 {
		t.Errorf("lost = %d", l.Stats().Lost)
	}
	// Close released the chain: it can be opened again.
	l2 := openLog(t, Config{Dir: dir})
	if e := appendN(t, l2, 1)[0]; e.Seq != 4 {
		t.Errorf("seq %d after reopen", e.Seq)
	}
}

func TestOpenTwiceRefused(t *testing.T) {
	dir := t.TempDir()
	openLog(t, Config{Dir: dir})
	if _, err := Open(Config{Dir: dir, Chain: "gw-test", Logger: quietLogger()}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open: %v", err)
	}
	if _, err := Open(Config{Dir: dir, Chain: "../evil"}); err == nil {
		t.Fatal("bad chain name accepted")
	}
}

func TestAppendContextCancelled(t *testing.T) {
	l := openLog(t, Config{Dir: t.TempDir()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Either outcome is allowed (the request may already be queued), but a
	// cancelled context must not hang and must not break the log.
	_, _ = l.Append(ctx, rec(0))
	if _, err := l.Append(context.Background(), rec(1)); err != nil {
		t.Fatal(err)
	}
}

// faultyFile fails writes (after writing half) and syncs while fail is set.
type faultyFile struct {
	*os.File
	fail atomic.Bool
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if f.fail.Load() {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, errors.New("injected: no space left on device")
	}
	return f.File.Write(p)
}

func (f *faultyFile) Sync() error {
	if f.fail.Load() {
		return errors.New("injected: input/output error")
	}
	return f.File.Sync()
}

func TestWriteFailureAndRepair(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir, CheckpointEvery: -1})
	appendN(t, l, 2) // creates the segment
	// Set before the next Append: the channel send orders it before the writer reads it.
	ff := &faultyFile{File: l.f.(*os.File)}
	l.f = ff
	l.backoff = time.Hour
	ff.fail.Store(true)
	for i := 0; i < 3; i++ {
		_, err := l.Append(context.Background(), rec(i))
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("append %d while failing: %v", i, err)
		}
	}
	if st := l.Stats(); st.Lost != 3 {
		t.Errorf("lost = %d, want 3", st.Lost)
	}
	if l.Ready() == nil {
		t.Error("Ready while writes fail")
	}
	ff.fail.Store(false)
	// Still within the backoff: fails fast without touching the file.
	if _, err := l.Append(context.Background(), rec(0)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("append within backoff: %v", err)
	}
	l.backoff = 0 // ordered before the writer's read by the next Append's send
	e, err := l.Append(context.Background(), rec(9))
	if err != nil {
		t.Fatalf("append after repair: %v", err)
	}
	if e.Seq != 4 {
		t.Errorf("seq %d, want 4 (3 is the audit.loss entry)", e.Seq)
	}
	// The writer clears the state just after answering the batch.
	for deadline := time.Now().Add(time.Second); l.Ready() != nil && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if err := l.Ready(); err != nil {
		t.Errorf("not Ready after the repair: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := allLines(t, dir, "gw-test")
	recompute(t, lines)
	loss, err := parseEntry(lines[2])
	if err != nil || loss.Kind != KindLoss || !bytes.Contains(loss.Summary, []byte(`"lost":4`)) {
		t.Errorf("entry 3 = %s (%v)", lines[2], err)
	}
	mustVerify(t, dir)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestCommitDelay: while appends arrive concurrently the writer holds a
// group commit open for the delay, so many appends share one fsync; a lone
// serial client never waits for it.
func TestCommitDelay(t *testing.T) {
	t.Run("serial appends do not wait", func(t *testing.T) {
		// A delay far longer than any scheduling hiccup of a loaded CI
		// machine: waiting for it once is a failure, never a slow pass.
		l := openLog(t, Config{Dir: t.TempDir(), CommitDelay: 10 * time.Second})
		end := l.Begin()
		defer end()
		start := time.Now()
		appendN(t, l, 5)
		if d := time.Since(start); d >= 10*time.Second {
			t.Fatalf("5 serial appends took %s: they waited for the commit delay", d)
		}
		if st := l.Stats(); st.Fsyncs != 5 {
			t.Errorf("%d fsyncs for 5 serial appends, want 5", st.Fsyncs)
		}
	})
	concurrent := func(t *testing.T, delay time.Duration) Stats {
		l := openLog(t, Config{Dir: t.TempDir(), CommitDelay: delay})
		const writers, each = 32, 20
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each writer is an exchange in progress; between its
				// appends it is busy elsewhere (a provider's answer).
				end := l.Begin()
				defer end()
				for i := range each {
					time.Sleep(time.Duration(w%4) * 100 * time.Microsecond)
					if _, err := l.Append(context.Background(), rec(w*each+i)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		st := l.Stats()
		if st.Entries != writers*each {
			t.Fatalf("%d entries, want %d", st.Entries, writers*each)
		}
		return st
	}
	t.Run("every exchange already in the batch: no wait", func(t *testing.T) {
		l := openLog(t, Config{Dir: t.TempDir(), CommitDelay: 10 * time.Second})
		var wg sync.WaitGroup
		start := time.Now()
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				end := l.Begin()
				defer end()
				for i := range 5 {
					if _, err := l.Append(context.Background(), rec(i)); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		// Each exchange waits for its own entry before the next: at most
		// one wait for the other's arrival per entry, never the full delay.
		if d := time.Since(start); d >= 10*time.Second {
			t.Fatalf("10 appends by 2 exchanges took %s: the writer waited for exchanges that were all in the batch", d)
		}
	})
	t.Run("concurrent appends share fsyncs", func(t *testing.T) {
		off, on := concurrent(t, -1), concurrent(t, 20*time.Millisecond)
		t.Logf("fsyncs for 640 concurrent appends: %d without a commit delay, %d with 20ms", off.Fsyncs, on.Fsyncs)
		// 32 writers each waiting for its entry: with the delay nearly every
		// writer is in each batch, about 20 fsyncs in all (without it, as
		// many as the disk's fsync time lets through: 40 and more here).
		if on.Fsyncs > 30 {
			t.Errorf("%d fsyncs with the commit delay (%d without): the batches did not grow", on.Fsyncs, off.Fsyncs)
		}
	})
}

// stallingFile blocks every Sync until released: a disk that hangs.
type stallingFile struct {
	*os.File
	release chan struct{}
}

func (f *stallingFile) Sync() error {
	<-f.release
	return f.File.Sync()
}

// TrySubmit never waits: with the writer stuck in an fsync and its queue
// full, the entry is refused at once and counted as lost, while Submit
// would wait. What was queued is written once the disk answers.
func TestTrySubmitOnAStalledDisk(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir, CheckpointEvery: -1, CommitDelay: -1})
	appendN(t, l, 1) // creates the segment
	sf := &stallingFile{File: l.f.(*os.File), release: make(chan struct{})}
	l.f = sf // ordered before the writer's read by the next send
	first, err := l.TrySubmit(rec(1))
	if err != nil {
		t.Fatal(err)
	}
	// The writer takes the first entry and blocks in its fsync; fill the queue.
	for deadline := time.Now().Add(5 * time.Second); l.queued() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	queued := 0
	for {
		if _, err := l.TrySubmit(rec(2)); err != nil {
			if !errors.Is(err, ErrQueueFull) || !errors.Is(err, ErrUnavailable) {
				t.Fatalf("full queue: %v", err)
			}
			break
		}
		if queued++; queued > queueLen+maxBatch {
			t.Fatal("the queue never filled")
		}
	}
	if st := l.Stats(); st.Lost != 1 {
		t.Errorf("lost %d, want 1", st.Lost)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Submit(ctx, rec(3)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Submit on a full queue: %v, want it to wait until its context ends", err)
	}
	close(sf.release)
	if _, err := first.Wait(context.Background()); err != nil {
		t.Fatalf("the entry taken before the stall: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rep := mustVerify(t, dir); rep.Entries != int64(2+queued) {
		t.Errorf("%d entries on disk, want %d", rep.Entries, 2+queued)
	}
}

// queued is how many appends wait for the writer to take them.
func (l *Log) queued() int {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	return len(l.queue)
}

// The appends queued together wait together: with the writer stuck in an
// fsync, no Wait returns (durable means fsynced, whatever the hand-off);
// once the disk answers each gets its own entry, in the chain's order, and
// a Submit that waited for room in the full queue is taken and written too.
func TestGroupedWaitsReturnOnlyOnceDurable(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir, CheckpointEvery: -1, CommitDelay: -1})
	appendN(t, l, 1)
	sf := &stallingFile{File: l.f.(*os.File), release: make(chan struct{})}
	l.f = sf
	stuck, err := l.Submit(context.Background(), rec(1))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); l.queued() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	var pend []*Pending
	for range queueLen {
		p, err := l.Submit(context.Background(), rec(2))
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, p)
	}
	late := make(chan *Pending)
	go func() {
		p, err := l.Submit(context.Background(), rec(3)) // the queue is full: waits for room
		if err != nil {
			t.Error(err)
		}
		late <- p
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	for _, p := range []*Pending{stuck, pend[0], pend[len(pend)-1]} {
		if _, err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait returned before the fsync: %v", err)
		}
	}
	if l.Durable() != 1 {
		t.Fatalf("durable %d before the fsync", l.Durable())
	}
	close(sf.release)
	want := int64(2)
	for _, p := range append([]*Pending{stuck}, pend...) {
		e, err := p.Wait(context.Background())
		if err != nil || e.Seq != want {
			t.Fatalf("entry %+v, %v; want seq %d", e, err, want)
		}
		if l.Durable() < e.Seq {
			t.Fatalf("Wait returned seq %d while %d is durable", e.Seq, l.Durable())
		}
		want++
	}
	e, err := (<-late).Wait(context.Background())
	if err != nil || e.Seq != want {
		t.Fatalf("the append that waited for room: %+v, %v; want seq %d", e, err, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rep := mustVerify(t, dir); rep.Entries != want {
		t.Errorf("%d entries on disk, want %d", rep.Entries, want)
	}
}
