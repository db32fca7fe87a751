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
// the process exits, so deliveries popped and never acknowledged are not
// handed out again (there is no other consumer to take them over).
type MemoryQueue struct {
	capacity int

	mu       sync.Mutex
	seq      uint64
	waiting  [numPriorities][]Delivery
	nWaiting int
	inflight map[string]struct{}
	// wake is closed by the next Push to wake every blocked Pop; it exists
	// only while some Pop waits, so an uncontended Push allocates nothing.
	wake chan struct{}
}

var _ Queue = (*MemoryQueue)(nil)

// NewMemoryQueue returns an empty queue holding at most capacity deliveries
// (waiting plus in flight); capacity ≤0 means DefaultMemoryCapacity.
func NewMemoryQueue(capacity int) *MemoryQueue {
	if capacity <= 0 {
		capacity = DefaultMemoryCapacity
	}
	return &MemoryQueue{capacity: capacity, inflight: make(map[string]struct{})}
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

// Pop implements Queue.
func (q *MemoryQueue) Pop(ctx context.Context) (Delivery, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Delivery{}, err
		}
		q.mu.Lock()
		if d, ok := q.takeLocked(); ok {
			q.mu.Unlock()
			return d, nil
		}
		if q.wake == nil {
			q.wake = make(chan struct{})
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return Delivery{}, ctx.Err()
		}
	}
}

// takeLocked moves the first delivery of the highest non-empty priority to
// the in-flight set.
func (q *MemoryQueue) takeLocked() (Delivery, bool) {
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
		q.inflight[d.ID] = struct{}{}
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
