package mailbox

import (
	"bytes"
	"context"
	"fmt"
	"slices"
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
// nobody else would take it over. A delivery due to be handed out again
// that was handed out MaxDeliveries times already becomes a dead letter
// instead, as with the Redis queue.
type MemoryQueue struct {
	capacity      int
	claimIdle     time.Duration
	maxDeliveries int
	deadMax       int
	now           func() time.Time // injectable for tests

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
	// dead are the dead letters, oldest first, at most deadMax.
	dead []DeadLetter
}

var _ Queue = (*MemoryQueue)(nil)

// MemoryQueueOptions configure a MemoryQueue; zero values take defaults.
type MemoryQueueOptions struct {
	Capacity  int           // deliveries waiting plus in flight; default DefaultMemoryCapacity
	ClaimIdle time.Duration // a delivery popped and not acked for this long is handed out again; default DefaultClaimIdle
	// MaxDeliveries is how many times a delivery is handed out without
	// being acknowledged before it becomes a dead letter; default
	// DefaultMaxDeliveries.
	MaxDeliveries int
	// DeadLetterMax caps the dead letters kept (the oldest go first);
	// default DefaultDeadLetterMax.
	DeadLetterMax int
}

// NewMemoryQueue returns an empty queue holding at most capacity deliveries
// (waiting plus in flight); capacity ≤0 means DefaultMemoryCapacity.
func NewMemoryQueue(capacity int) *MemoryQueue {
	return NewMemoryQueueWithOptions(MemoryQueueOptions{Capacity: capacity})
}

// NewMemoryQueueWithOptions returns an empty queue configured by o.
func NewMemoryQueueWithOptions(o MemoryQueueOptions) *MemoryQueue {
	return &MemoryQueue{
		capacity:      orDefault(o.Capacity, DefaultMemoryCapacity),
		claimIdle:     orDefault(o.ClaimIdle, DefaultClaimIdle),
		maxDeliveries: orDefault(o.MaxDeliveries, DefaultMaxDeliveries),
		deadMax:       orDefault(o.DeadLetterMax, DefaultDeadLetterMax),
		now:           time.Now, inflight: make(map[string]Delivery), popped: make(map[string]int64)}
}

// Push implements Queue. The queue keeps d.Body: the caller must not modify
// it afterwards.
func (q *MemoryQueue) Push(ctx context.Context, d Delivery) (Delivery, error) {
	if err := ctx.Err(); err != nil {
		return Delivery{}, err
	}
	d = d.forPush()
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
// the waiting ones, as the Redis queue claims before it reads; one handed
// out MaxDeliveries times already goes to the dead letters instead.
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
			if d.Deliveries >= q.maxDeliveries {
				q.buryLocked(d, unackedReason(d.Deliveries), now)
				q.mu.Unlock()
				continue
			}
			d.Reclaimed = true
			d.Deliveries++
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
		d.Deliveries = 1
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

// unackedReason is the reason of a delivery that became a dead letter
// because nobody acknowledged it.
func unackedReason(n int) string {
	return fmt.Sprintf("handed out %d times without being acknowledged", n)
}

// buryLocked moves an in-flight delivery to the dead letters.
func (q *MemoryQueue) buryLocked(d Delivery, reason string, now time.Time) {
	delete(q.inflight, d.ID)
	delete(q.popped, d.ID)
	if len(q.dead) >= q.deadMax {
		// Drop the oldest: the list is for an operator to look at, and the
		// newest are what they look for.
		q.dead = slices.Delete(q.dead, 0, len(q.dead)-q.deadMax+1)
	}
	d.Reclaimed = false
	q.dead = append(q.dead, DeadLetter{Delivery: d, Reason: reason, At: now})
}

// DeadLetter implements Queue. A delivery that is not in flight (acked, or
// buried already) is not buried again.
func (q *MemoryQueue) DeadLetter(ctx context.Context, d Delivery, reason string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	cur, ok := q.inflight[d.ID]
	if !ok {
		return nil
	}
	q.buryLocked(cur, reason, q.now())
	return nil
}

// DeadLetters implements Queue.
func (q *MemoryQueue) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.dead)
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]DeadLetter, 0, n)
	for i := len(q.dead) - 1; i >= 0 && len(out) < n; i-- {
		dl := q.dead[i]
		dl.Delivery.Body = bytes.Clone(dl.Delivery.Body)
		out = append(out, dl)
	}
	return out, nil
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
