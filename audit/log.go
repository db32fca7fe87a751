package audit

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// queueLen bounds the appends waiting for the writer; beyond it Append
	// blocks (until its context ends), so memory stays bounded under load.
	queueLen = 4096
	// maxBatch bounds one group commit, so one fsync never waits behind an
	// unbounded write.
	maxBatch = 4096
	// repairBackoff spaces the writer's attempts to repair a failed segment:
	// appends in between fail fast instead of hammering a sick disk.
	repairBackoff = time.Second
)

// Log appends entries to one chain. It is safe for concurrent use; all
// writes go through one goroutine, which batches concurrent appends into
// one write and one fsync (group commit).
type Log struct {
	dir, chain string
	chainJSON  []byte // chain as a canonical JSON string
	segMax     int64
	cpEvery    int64
	cpInterval time.Duration
	delay      time.Duration      // commit delay; 0: none
	key        ed25519.PrivateKey // nil: unsigned checkpoints
	log        *slog.Logger
	lock       *os.File

	// The hand-off: appends are queued under qmu and the writer takes the
	// whole queue at once, so an append costs a lock and a slice append
	// rather than a channel send, and the writer a wake-up per batch rather
	// than a receive per entry. Every append queued between two takes
	// waits on one group, woken by one close when its batch is durable.
	qmu    sync.Mutex
	closed bool
	queue  []*request
	spare  []*request    // the previous queue's array, reused
	group  *group        // the group of the appends queued since the last take
	space  chan struct{} // closed by the next take; nil unless a Submit waits for room
	kick   chan struct{} // buffered (1): the writer has work (see submit)
	stop   chan struct{}
	// ended wakes a lingering writer when an exchange ends and with it every
	// exchange in progress has an entry waiting (see Begin).
	ended chan struct{}
	done  chan struct{}
	// lingering is set while the writer holds a group commit open (linger):
	// appends then queue without waking it, and only the append or the end
	// of an exchange that completes the batch does, so the writer wakes
	// once per batch rather than once per entry and per exchange.
	lingering atomic.Bool
	// pending counts the appends queued or held in a lingering batch: those
	// of the next commit.
	pending atomic.Int64

	closeOnce sync.Once
	closeErr  error

	// Owned by the writer goroutine (and by Open before it starts).
	f           segmentWriter // current segment; nil until the next flush creates one
	segName     string
	segSize     int64 // durable size of the current segment
	seq         int64 // last durable entry
	prev        string
	buf         []byte
	batch       []*request
	lingerT     *time.Timer // the commit delay's timer, reused
	broken      error       // set by a failed write; cleared by a successful repair
	brokenSince time.Time
	lastRepair  time.Time
	backoff     time.Duration // repairBackoff; tests shorten it
	lostSince   int64         // appends failed since broken was set
	cpFile      *os.File
	cpSize      int64 // durable size of the checkpoints file
	cpDirty     bool  // a checkpoint write failed after cpSize
	cp          Checkpoint
	tree        *tree       // over the entries from the marked checkpoint on (merkle.go)
	noteKey     *noteSigner // signs the tree's checkpoint notes; nil without a key
	finalErr    error

	entries, batches, fsyncs, fsyncNanos, lost, checkpoints, checkpointErrors atomic.Uint64
	// active counts the exchanges in progress (Begin); the writer lingers
	// only while some of them have nothing in the batch.
	active atomic.Int64
	// unwritable mirrors broken for other goroutines (Ready).
	unwritable atomic.Pointer[string]
	// durable mirrors seq for other goroutines (Durable).
	durable atomic.Int64
}

// Ready reports whether the log can make entries durable: it fails from
// the first failed write until a repair succeeds, so a replica that cannot
// audit (fail_mode closed) leaves the load balancer instead of answering
// 503 to everything.
func (l *Log) Ready() error {
	if p := l.unwritable.Load(); p != nil {
		return fmt.Errorf("audit trail not writable: %s", *p)
	}
	return nil
}

// segmentWriter is the part of *os.File the writer uses on a segment; tests
// substitute one that fails.
type segmentWriter interface {
	Write([]byte) (int, error)
	Sync() error
	Truncate(int64) error
	Close() error
}

type request struct {
	p    *prepared
	body prepared // p of a submitted append
	g    *group   // nil for entries the log writes on its own
	// res is set by the writer before g.done closes: the entry as
	// written (write), then its error if the write failed (fail).
	res  result
	leaf []byte    // the Merkle leaf hash of the entry's line, set by write
	at   time.Time // when the append was handed to the writer
	pend Pending   // the caller's handle, in the same allocation
}

// group is the appends queued between two takes of the writer: they are
// committed in one batch (with possibly others) and woken by one close.
type group struct{ done chan struct{} }

func newGroup() *group { return &group{done: make(chan struct{})} }

type result struct {
	e   Entry
	err error
}

// Stats are cumulative counters for metrics.
type Stats struct {
	Entries          uint64        // entries made durable
	Batches          uint64        // group commits that wrote entries
	Fsyncs           uint64        // fsyncs of segments (a batch spanning a rotation makes two)
	FsyncTime        time.Duration // total time spent in those fsyncs
	Lost             uint64        // appends refused with ErrUnavailable: records the trail does not have
	Checkpoints      uint64        // checkpoints written by this process
	CheckpointErrors uint64        // checkpoint writes that failed (retried at the next trigger)
}

// Open opens (or creates) cfg.Chain in cfg.Dir and resumes it. If a crash
// left the end of the last segment or of the checkpoints file torn, the
// torn bytes are moved aside to a .torn file, the file is cut back to its
// last whole entry, and an audit.recovery entry records what was moved.
// Only one process may hold a chain at a time.
func Open(cfg Config) (*Log, error) {
	if cfg.Dir == "" {
		return nil, errors.New("open audit log: dir is required")
	}
	if err := validChain(cfg.Chain); err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	l := &Log{
		dir: cfg.Dir, chain: cfg.Chain,
		chainJSON:  appendCanonicalString(nil, cfg.Chain),
		segMax:     cfg.SegmentMaxBytes,
		cpEvery:    int64(cfg.CheckpointEvery),
		cpInterval: cfg.CheckpointInterval,
		delay:      cfg.CommitDelay,
		log:        cfg.Logger,
		prev:       GenesisHash,
		backoff:    repairBackoff,
		group:      newGroup(),
		kick:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		ended:      make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
	if l.segMax <= 0 {
		l.segMax = defaultSegmentMaxBytes
	}
	if l.cpEvery == 0 {
		l.cpEvery = defaultCheckpointEvery
	}
	if l.cpInterval == 0 {
		l.cpInterval = defaultCheckpointInterval
	}
	switch {
	case l.delay == 0:
		l.delay = defaultCommitDelay
	case l.delay < 0:
		l.delay = 0
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.log = l.log.With("component", "audit", "chain", l.chain)
	if cfg.SigningKeyFile != "" {
		key, err := LoadPrivateKey(cfg.SigningKeyFile)
		if err != nil {
			return nil, fmt.Errorf("open audit log: %w", err)
		}
		if fi, err := os.Stat(cfg.SigningKeyFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			l.log.Warn("audit signing key is readable by group or others", "file", cfg.SigningKeyFile, "mode", fi.Mode().Perm().String())
		}
		l.key = key
		if l.noteKey, err = newNoteSigner(Origin(l.chain), key); err != nil {
			return nil, fmt.Errorf("open audit log: %w", err)
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	lock, err := lockChain(join(cfg.Dir, cfg.Chain+".lock"))
	if err != nil {
		return nil, fmt.Errorf("open audit log: chain %q: %w", cfg.Chain, err)
	}
	l.lock = lock
	if err := l.resume(); err != nil {
		l.closeFiles()
		return nil, fmt.Errorf("open audit log %s: %w", cfg.Dir, err)
	}
	l.durable.Store(l.seq)
	go l.run()
	return l, nil
}

// Append writes r as the chain's next entry and returns it once it is
// durable (written and fsynced). Concurrent appends share one fsync.
//
// Errors: a record that cannot be encoded (empty kind, bad payload hash,
// unencodable summary, ErrTooLarge) is returned at once. A failed write,
// fsync or rotation, or a closed log, returns an error wrapping
// ErrUnavailable; after a failure, each later batch first tries (at most
// once a second) to cut the segment back to its last durable size, and
// appends fail fast until that works. The first batch after a repair
// starts with an audit.loss entry counting the appends that failed. If ctx
// ends first, Append returns ctx's error, but a request already handed to
// the writer may still be written.
func (l *Log) Append(ctx context.Context, r Record) (Entry, error) {
	p, err := l.Submit(ctx, r)
	if err != nil {
		return Entry{}, err
	}
	return p.Wait(ctx)
}

// Submit prepares r and hands it to the writer without waiting for it to
// be durable: the caller goes on (an upstream call, say) while the fsync
// runs, and calls Wait before it acts on the entry being written. Submit
// blocks only while the writer's queue is full, until ctx ends. Its errors
// are Append's.
func (l *Log) Submit(ctx context.Context, r Record) (*Pending, error) {
	return l.submit(ctx, r, true)
}

// ErrQueueFull is TrySubmit's error when the writer's queue is full.
var ErrQueueFull = errors.New("audit queue full")

// TrySubmit is Submit that never waits: when the writer's queue is full (a
// disk that stalls) the entry is not taken, it is counted as lost (the
// audit.loss entry after a repair reports it), and the error wraps
// ErrUnavailable and ErrQueueFull. It is for fail_mode open, which serves
// whether or not the entry is written.
func (l *Log) TrySubmit(r Record) (*Pending, error) {
	return l.submit(context.Background(), r, false)
}

func (l *Log) submit(ctx context.Context, r Record, wait bool) (*Pending, error) {
	// One allocation for the request and its encoded body.
	req := &request{}
	if err := req.body.fill(l.chainJSON, r); err != nil {
		return nil, err
	}
	req.p, req.at = &req.body, time.Now()
	for {
		l.qmu.Lock()
		if l.closed {
			l.qmu.Unlock()
			l.lost.Add(1)
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, ErrClosed)
		}
		if len(l.queue) < queueLen {
			req.g = l.group
			l.queue = append(l.queue, req)
			wake := l.wakes(len(l.queue), l.pending.Add(1))
			l.qmu.Unlock()
			if wake {
				select {
				case l.kick <- struct{}{}:
				default:
				}
			}
			req.pend.req = req
			return &req.pend, nil
		}
		if !wait {
			l.qmu.Unlock()
			l.lost.Add(1)
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, ErrQueueFull)
		}
		if l.space == nil {
			l.space = make(chan struct{})
		}
		space := l.space
		l.qmu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return nil, fmt.Errorf("audit append: %w", ctx.Err())
		}
	}
}

// wakes reports whether an append must wake the writer, given the queue's
// length and the appends pending once it is queued. An idle writer takes
// the whole queue when it wakes: only the append that made the queue
// non-empty wakes it. A lingering writer waits for its batch to hold an
// entry of every exchange in progress (or to fill): only the append that
// completes it wakes it; the rest wait for its timer.
func (l *Log) wakes(queued int, pending int64) bool {
	if !l.lingering.Load() {
		return queued == 1
	}
	return pending >= l.active.Load() || pending >= maxBatch || queued >= queueLen
}

// take hands the writer every queued append and starts a new group for
// the appends after them.
func (l *Log) take() ([]*request, *group) {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	q, g := l.queue, l.group
	if len(q) == 0 {
		return nil, nil
	}
	l.queue, l.spare = l.spare[:0], nil
	l.group = newGroup()
	if l.space != nil {
		close(l.space)
		l.space = nil
	}
	return q, g
}

// recycle gives the writer's copy of a taken queue back for reuse.
func (l *Log) recycle(q []*request) {
	clear(q)
	l.qmu.Lock()
	if l.spare == nil && cap(q) <= queueLen {
		l.spare = q[:0]
	}
	l.qmu.Unlock()
}

// Close writes every append already accepted, then a final checkpoint if
// the chain moved since the last one, and releases the chain. Later calls
// return the same result; later Appends fail with ErrClosed.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.qmu.Lock()
		l.closed = true
		l.qmu.Unlock()
		close(l.stop)
		<-l.done
		l.closeErr = l.finalErr
	})
	return l.closeErr
}

// Stats returns the counters so far.
func (l *Log) Stats() Stats {
	return Stats{
		Entries:          l.entries.Load(),
		Batches:          l.batches.Load(),
		Fsyncs:           l.fsyncs.Load(),
		FsyncTime:        time.Duration(l.fsyncNanos.Load()),
		Lost:             l.lost.Load(),
		Checkpoints:      l.checkpoints.Load(),
		CheckpointErrors: l.checkpointErrors.Load(),
	}
}

// Durable is the seq of the chain's last durable entry: a reader of the
// files (a Follower) goes no further, since a line past it may still be
// cut back by a failed write's repair.
func (l *Log) Durable() int64 { return l.durable.Load() }

// Chain returns the chain id this log writes.
func (l *Log) Chain() string { return l.chain }

// run is the writer goroutine.
func (l *Log) run() {
	defer close(l.done)
	var tick <-chan time.Time
	if l.cpInterval > 0 {
		t := time.NewTicker(l.cpInterval)
		defer t.Stop()
		tick = t.C
	}
	var groups []*group
	for {
		select {
		case <-l.kick:
			q, g := l.take()
			if q == nil {
				continue
			}
			b := append(l.batch[:0], q...)
			groups = append(groups[:0], g)
			l.recycle(q)
			if l.delay > 0 && l.active.Load() > int64(len(b)) {
				b, groups = l.linger(b, groups)
			}
			l.pending.Add(-int64(len(b)))
			l.commit(b)
			wake(groups)
			clear(b) // drop the finished requests' buffers
			l.batch = b[:0]
		case <-tick:
			_ = l.checkpoint() // logged and counted inside; retried next time
		case <-l.stop:
			// Close set closed under qmu before closing stop, so no Append
			// can queue any more: what is queued now is all there will be.
			for {
				q, g := l.take()
				if q == nil {
					break
				}
				l.pending.Add(-int64(len(q)))
				l.commit(q)
				wake([]*group{g})
			}
			l.finalErr = l.broken
			if err := l.checkpoint(); err != nil && l.finalErr == nil {
				l.finalErr = err
			}
			l.closeFiles()
			return
		}
	}
}

// wake releases the waiters of committed groups: one close each, however
// many appends the group holds.
func wake(groups []*group) {
	for i, g := range groups {
		close(g.done)
		groups[i] = nil
	}
}

// Begin marks the start of an exchange that will append entries (an
// answer waits for its own); the returned end marks its end. The writer
// uses the count for the commit delay: it holds a group commit open only
// while exchanges are in progress that have nothing in the batch yet, so
// that their entries share its fsync, and stops as soon as every one of
// them has. A lone client, or every client already waiting in the batch,
// never waits for it.
func (l *Log) Begin() (end func()) {
	l.active.Add(1)
	return func() {
		// Only the end that leaves every exchange in progress with an
		// entry in a lingering batch wakes the writer.
		if n := l.active.Add(-1); !l.lingering.Load() || l.pending.Load() < n {
			return
		}
		select {
		case l.ended <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// linger holds a batch open for more appends until its first entry has
// waited the commit delay, or until the batch holds an entry of every
// exchange in progress. Each fsync costs the gateway CPU (the page
// writeback runs on the calling thread) whether it carries one entry or
// fifty. The appends queue meanwhile without waking the writer (wakes);
// it takes them all once, at the end.
func (l *Log) linger(b []*request, groups []*group) ([]*request, []*group) {
	wait := l.delay - time.Since(b[0].at)
	if wait <= 0 {
		return b, groups
	}
	if l.lingerT == nil {
		l.lingerT = time.NewTimer(wait)
	} else {
		l.lingerT.Reset(wait)
	}
	defer l.lingerT.Stop()
	// Set before the test below reads pending and active, so that an
	// append or an end either sees it (and wakes the writer) or is seen.
	l.lingering.Store(true)
	full := func() bool {
		n := l.pending.Load()
		return n >= maxBatch || l.active.Load() <= n
	}
wait:
	for !full() {
		select {
		case <-l.kick:
			// An append completed the batch, or filled the queue.
		case <-l.ended:
			// Fewer exchanges in progress: the loop's test decides again.
		case <-l.lingerT.C:
			break wait
		case <-l.stop:
			// Close: commit what is here; the run loop drains the rest.
			break wait
		}
	}
	q, g := l.takeLingered()
	if q != nil {
		b = append(b, q...)
		groups = append(groups, g)
		l.recycle(q)
	}
	return b, groups
}

// takeLingered is take at the end of a linger: the appends queued after
// it wake the writer again as an idle writer's do.
func (l *Log) takeLingered() ([]*request, *group) {
	l.qmu.Lock()
	l.lingering.Store(false)
	l.qmu.Unlock()
	return l.take()
}

// commit writes one batch and answers its requests.
func (l *Log) commit(batch []*request) {
	if l.broken != nil {
		now := time.Now()
		if now.Sub(l.lastRepair) < l.backoff {
			l.fail(batch, l.broken)
			return
		}
		l.lastRepair = now
		if err := l.repair(); err != nil {
			l.log.Debug("audit repair failed", "err", err)
			l.fail(batch, l.broken)
			return
		}
		// The loss is recorded in the chain itself, ahead of the batch.
		p, err := prepare(l.chainJSON, Record{Kind: KindLoss, Object: Members(
			"lost", l.lostSince,
			"since", l.brokenSince.UTC().Format(tsLayout),
			"error", l.broken.Error(),
		)})
		if err == nil {
			batch = append([]*request{{p: p}}, batch...)
		}
	}
	if err := l.write(batch); err != nil {
		if l.broken == nil {
			l.log.Error("audit write failed; appends fail until the log is repaired", "err", err)
			l.brokenSince = time.Now()
		}
		l.broken = err
		msg := err.Error()
		l.unwritable.Store(&msg)
		return
	}
	if l.broken != nil {
		l.log.Info("audit log writable again", "lost", l.lostSince, "since", l.brokenSince)
		l.broken, l.lostSince = nil, 0
		l.unwritable.Store(nil)
	}
	if l.cpEvery > 0 && l.seq-l.cp.Seq >= l.cpEvery {
		_ = l.checkpoint()
	}
}

// write encodes batch, appends it to the current segment (rotating first
// where an entry would take a segment past segMax), fsyncs and answers the
// requests. Requests in a part that was fsynced before a failure are
// answered with success; the rest with the error.
func (l *Log) write(batch []*request) error {
	buf := l.buf[:0]
	seq, prev := l.seq, l.prev
	start := 0 // first request not yet durable
	for i, r := range batch {
		seq++
		ts := time.Now()
		before := len(buf)
		var hash string
		buf, hash = r.p.appendLine(buf, seq, prev, ts)
		r.p.release() // the line is in buf; nothing is made from the body again
		r.leaf = leafHash(buf[before : len(buf)-1])
		r.res = result{e: r.p.entry(l.chain, seq, prev, hash, ts)}
		prev = hash
		if size := l.segSize + int64(before); size > 0 && size+int64(len(buf)-before) > l.segMax {
			if before > 0 {
				if err := l.flush(buf[:before], batch[start].res.e.Seq); err != nil {
					l.fail(batch[start:], err)
					return err
				}
				l.ack(batch[start:i])
				start = i
			}
			l.rotate()
			buf = append(buf[:0], buf[before:]...)
		}
	}
	l.buf = buf[:0]
	if err := l.flush(buf, batch[start].res.e.Seq); err != nil {
		l.fail(batch[start:], err)
		return err
	}
	l.ack(batch[start:])
	l.batches.Add(1)
	return nil
}

// flush appends data (whose first entry has seq firstSeq) to the current
// segment, creating it if there is none, and fsyncs it.
func (l *Log) flush(data []byte, firstSeq int64) error {
	if l.f == nil {
		name := segmentName(l.chain, firstSeq)
		f, err := os.OpenFile(join(l.dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
		if err != nil {
			return fmt.Errorf("%w: create segment: %w", ErrUnavailable, err)
		}
		// A segment is named after its first entry, which is not written
		// yet, so a non-empty file by that name is not ours to append to.
		if fi, err := f.Stat(); err != nil || fi.Size() != 0 {
			_ = f.Close()
			return fmt.Errorf("%w: segment %s already exists and is not empty", ErrUnavailable, name)
		}
		if err := syncDir(l.dir); err != nil {
			_ = f.Close()
			return fmt.Errorf("%w: sync audit dir: %w", ErrUnavailable, err)
		}
		l.f, l.segName, l.segSize = f, name, 0
	}
	if _, err := l.f.Write(data); err != nil {
		return fmt.Errorf("%w: write %s: %w", ErrUnavailable, l.segName, err)
	}
	t := time.Now()
	err := datasync(l.f)
	l.fsyncNanos.Add(uint64(time.Since(t)))
	l.fsyncs.Add(1)
	if err != nil {
		return fmt.Errorf("%w: fsync %s: %w", ErrUnavailable, l.segName, err)
	}
	l.segSize += int64(len(data))
	return nil
}

// rotate closes the current segment; the next flush starts a new one.
func (l *Log) rotate() {
	if l.f == nil {
		return
	}
	if err := l.f.Close(); err != nil {
		// Its data is already fsynced; a failed close loses nothing.
		l.log.Warn("audit close segment", "segment", l.segName, "err", err)
	}
	l.log.Debug("audit segment rotated", "segment", l.segName, "bytes", l.segSize)
	l.f, l.segName, l.segSize = nil, "", 0
}

// repair cuts the current segment back to its durable size, removing
// whatever a failed write left after it.
func (l *Log) repair() error {
	if l.f == nil {
		return nil
	}
	if err := l.f.Truncate(l.segSize); err != nil {
		return err
	}
	return l.f.Sync()
}

func (l *Log) ack(reqs []*request) {
	if len(reqs) == 0 {
		return
	}
	last := reqs[len(reqs)-1].res.e
	l.seq, l.prev = last.Seq, last.Hash
	l.durable.Store(last.Seq)
	l.entries.Add(uint64(len(reqs)))
	for _, r := range reqs {
		l.tree.add(r.leaf)
	}
}

func (l *Log) fail(reqs []*request, err error) {
	for _, r := range reqs {
		if r.g != nil {
			l.lost.Add(1)
			l.lostSince++
		}
		r.res = result{err: err}
	}
}

// checkpoint appends a (signed) checkpoint of the last durable entry if the
// chain moved since the last checkpoint.
func (l *Log) checkpoint() error {
	if l.seq == 0 || l.seq == l.cp.Seq || l.broken != nil {
		return nil
	}
	cp := Checkpoint{Chain: l.chain, Seq: l.seq, Hash: l.prev, TS: time.Now().UTC().Format(tsLayout)}
	cp = signCheckpoint(l.withTree(cp), l.key)
	if err := l.writeCheckpoint(cp); err != nil {
		l.checkpointErrors.Add(1)
		l.log.Error("audit checkpoint failed", "seq", cp.Seq, "err", err)
		return err
	}
	l.cp = cp
	l.checkpoints.Add(1)
	return nil
}

func (l *Log) writeCheckpoint(cp Checkpoint) error {
	name := checkpointName(l.chain)
	if l.cpFile == nil {
		f, err := os.OpenFile(join(l.dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
		if err != nil {
			return fmt.Errorf("open %s: %w", name, err)
		}
		if err := syncDir(l.dir); err != nil {
			_ = f.Close()
			return fmt.Errorf("sync audit dir: %w", err)
		}
		l.cpFile = f
	}
	if l.cpDirty {
		if err := l.cpFile.Truncate(l.cpSize); err != nil {
			return fmt.Errorf("repair %s: %w", name, err)
		}
		l.cpDirty = false
	}
	line := cp.line()
	_, err := l.cpFile.Write(line)
	if err == nil {
		err = l.cpFile.Sync()
	}
	if err != nil {
		l.cpDirty = true
		return fmt.Errorf("write %s: %w", name, err)
	}
	l.cpSize += int64(len(line))
	return nil
}

func (l *Log) closeFiles() {
	if l.f != nil {
		_ = l.f.Close()
	}
	if l.cpFile != nil {
		_ = l.cpFile.Close()
	}
	l.f, l.cpFile = nil, nil
	if l.lock != nil {
		unlockChain(l.lock)
		l.lock = nil
	}
}
