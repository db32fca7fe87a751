package mailbox

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// DefaultMemoryCapacity is the MemoryQueue capacity when none is given.
const DefaultMemoryCapacity = 10000

// MemoryQueue is a Queue for a single replica. Everything in it is lost when
// the process exits. A delivery popped and not acknowledged within ClaimIdle
// is handed out again (Reclaimed set), as the Redis queue's XAUTOCLAIM
// does: a worker that could not record a delivery (the audit trail down)
// leaves it unacknowledged to have it retried, and in a single replica
// nobody else would take it over.
type MemoryQueue struct {
	capacity  int
	claimIdle time.Duration
	now       func() time.Time // injectable for tests

	mu       sync.Mutex
	seq      uint64
	waiting  [numPriorities][]Delivery
	nWaiting int
	// inflight are the deliveries popped and not acknowledged, popped when
	// (Unix ns; two maps, as a delivery with its time outgrows what a map
	// stores in place and every Pop would allocate). At most about one per
	// worker unless they cannot be recorded, so Pop scans them for the
	// oldest rather than keeping them ordered.
	inflight map[string]Delivery
	popped   map[string]int64
	// wake is closed by the next Push to wake every blocked Pop; it exists
	// only while some Pop waits, so an uncontended Push allocates nothing.
	wake chan struct{}
}

var _ Queue = (*MemoryQueue)(nil)

// MemoryQueueOptions configure a MemoryQueue; zero values take defaults.
type MemoryQueueOptions struct {
	Capacity  int           // deliveries waiting plus in flight; default DefaultMemoryCapacity
	ClaimIdle time.Duration // a delivery popped and not acked for this long is handed out again; default DefaultClaimIdle
}

// NewMemoryQueue returns an empty queue holding at most capacity deliveries
// (waiting plus in flight); capacity ≤0 means DefaultMemoryCapacity.
func NewMemoryQueue(capacity int) *MemoryQueue {
	return NewMemoryQueueWithOptions(MemoryQueueOptions{Capacity: capacity})
}

// NewMemoryQueueWithOptions returns an empty queue configured by o.
func NewMemoryQueueWithOptions(o MemoryQueueOptions) *MemoryQueue {
	if o.Capacity <= 0 {
		o.Capacity = DefaultMemoryCapacity
	}
	if o.ClaimIdle <= 0 {
		o.ClaimIdle = DefaultClaimIdle
	}
	return &MemoryQueue{capacity: o.Capacity, claimIdle: o.ClaimIdle, now: time.Now,
		inflight: make(map[string]Delivery), popped: make(map[string]int64)}
}

// Push implements Queue. The queue keeps d.Body: the caller must not modify
// it afterwards.
func (q *MemoryQueue) Push(ctx context.Context, d Delivery) (Delivery, error) {
	if err := ctx.Err(); err != nil {
		return Delivery{}, err
	}
	d.Priority = clampPriority(d.Priority)
	d.Reclaimed = false
	if d.EnqueuedAt.IsZero() {
		d.EnqueuedAt = time.Now()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.nWaiting+len(q.inflight) >= q.capacity {
		return Delivery{}, fmt.Errorf("%w: %d deliveries queued", ErrFull, q.capacity)
	}
	q.seq++
	d.ID = strconv.FormatUint(q.seq, 10)
	q.waiting[d.Priority] = append(q.waiting[d.Priority], d)
	q.nWaiting++
	if q.wake != nil {
		close(q.wake)
		q.wake = nil
	}
	return d, nil
}

// Pop implements Queue. A delivery due to be handed out again comes before
// the waiting ones, as the Redis queue claims before it reads.
func (q *MemoryQueue) Pop(ctx context.Context) (Delivery, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Delivery{}, err
		}
		q.mu.Lock()
		now := q.now()
		oldest, due, busy := q.oldestLocked()
		if busy && !now.Before(due) {
			d := q.inflight[oldest]
			d.Reclaimed = true
			q.inflight[oldest], q.popped[oldest] = d, now.UnixNano()
			q.mu.Unlock()
			return d, nil
		}
		if d, ok := q.takeLocked(now); ok {
			q.mu.Unlock()
			return d, nil
		}
		if q.wake == nil {
			q.wake = make(chan struct{})
		}
		wake := q.wake
		var claim <-chan time.Time
		var timer *time.Timer
		if busy {
			timer = time.NewTimer(due.Sub(now))
			claim = timer.C
		}
		q.mu.Unlock()
		select {
		case <-wake:
		case <-claim:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// oldestLocked is the id of the in-flight delivery popped longest ago and
// when it is due to be handed out again, if there is one.
func (q *MemoryQueue) oldestLocked() (id string, due time.Time, ok bool) {
	var at int64
	for k, t := range q.popped {
		if !ok || t < at {
			id, at, ok = k, t, true
		}
	}
	return id, time.Unix(0, at).Add(q.claimIdle), ok
}

// takeLocked moves the first delivery of the highest non-empty priority to
// the in-flight set.
func (q *MemoryQueue) takeLocked(now time.Time) (Delivery, bool) {
	for p := range q.waiting {
		w := q.waiting[p]
		if len(w) == 0 {
			continue
		}
		d := w[0]
		w[0] = Delivery{} // drop the reference to Body held by the backing array
		q.waiting[p] = w[1:]
		if len(q.waiting[p]) == 0 {
			q.waiting[p] = nil // let an emptied backing array go
		}
		q.nWaiting--
		q.inflight[d.ID], q.popped[d.ID] = d, now.UnixNano()
		return d, true
	}
	return Delivery{}, false
}

// Ack implements Queue.
func (q *MemoryQueue) Ack(ctx context.Context, d Delivery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	delete(q.inflight, d.ID)
	delete(q.popped, d.ID)
	q.mu.Unlock()
	return nil
}

// Len implements Queue.
func (q *MemoryQueue) Len(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(q.nWaiting + len(q.inflight)), nil
}
