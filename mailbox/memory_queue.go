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
	inflight map[string]inflight
	// nextClaim is when the oldest in-flight delivery may be handed out
	// again (zero: nothing in flight, or not yet computed).
	nextClaim time.Time
	// wake is closed by the next Push to wake every blocked Pop; it exists
	// only while some Pop waits, so an uncontended Push allocates nothing.
	wake chan struct{}
}

// inflight is a popped delivery and when it was popped.
type inflight struct {
	d      Delivery
	popped time.Time
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
	return &MemoryQueue{capacity: o.Capacity, claimIdle: o.ClaimIdle, now: time.Now, inflight: make(map[string]inflight)}
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
		if d, ok := q.reclaimLocked(now); ok {
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
		if !q.nextClaim.IsZero() {
			timer = time.NewTimer(q.nextClaim.Sub(now))
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

// reclaimLocked hands out again the oldest in-flight delivery popped at
// least claimIdle ago, if any, and computes when the next one is due.
func (q *MemoryQueue) reclaimLocked(now time.Time) (Delivery, bool) {
	if q.nextClaim.IsZero() || now.Before(q.nextClaim) {
		return Delivery{}, false
	}
	var oldest *inflight
	for id := range q.inflight {
		f := q.inflight[id]
		if oldest == nil || f.popped.Before(oldest.popped) || f.popped.Equal(oldest.popped) && f.d.ID < oldest.d.ID {
			oldest = &f
		}
	}
	if oldest == nil || now.Sub(oldest.popped) < q.claimIdle {
		q.scheduleLocked()
		return Delivery{}, false
	}
	d := oldest.d
	d.Reclaimed = true
	q.inflight[d.ID] = inflight{d: d, popped: now}
	q.scheduleLocked()
	return d, true
}

// scheduleLocked sets nextClaim from the oldest in-flight delivery.
func (q *MemoryQueue) scheduleLocked() {
	q.nextClaim = time.Time{}
	for _, f := range q.inflight {
		if due := f.popped.Add(q.claimIdle); q.nextClaim.IsZero() || due.Before(q.nextClaim) {
			q.nextClaim = due
		}
	}
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
		q.inflight[d.ID] = inflight{d: d, popped: now}
		if due := now.Add(q.claimIdle); q.nextClaim.IsZero() || due.Before(q.nextClaim) {
			q.nextClaim = due
		}
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
	if len(q.inflight) == 0 {
		q.nextClaim = time.Time{}
	}
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
