package mailbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newQueueFunc builds an empty queue holding at most capacity deliveries.
type newQueueFunc func(t *testing.T, capacity int) Queue

// queueBehaviours is the table every Queue implementation runs.
var queueBehaviours = []struct {
	name string
	run  func(t *testing.T, newQ newQueueFunc)
}{
	{"priority order", queuePriorityOrder},
	{"priority clamped", queuePriorityClamped},
	{"fifo within priority", queueFIFO},
	{"fields round trip", queueFields},
	{"pop blocks until push", queuePopBlocks},
	{"pop ends with ctx", queuePopCancel},
	{"ack removes", queueAck},
	{"full at capacity", queueFull},
	{"concurrent exactly once", queueConcurrent},
	{"dead letter", queueDeadLetter},
	{"delivery id and count", queueDeliveryID},
}

func runQueueBehaviours(t *testing.T, newQ newQueueFunc) {
	t.Helper()
	for _, b := range queueBehaviours {
		t.Run(b.name, func(t *testing.T) { b.run(t, newQ) })
	}
}

func TestMemoryQueue(t *testing.T) {
	runQueueBehaviours(t, func(_ *testing.T, capacity int) Queue { return NewMemoryQueue(capacity) })
}

func mustPush(t *testing.T, q Queue, d Delivery) Delivery {
	t.Helper()
	got, err := q.Push(t.Context(), d)
	if err != nil {
		t.Fatalf("push %s: %v", d.MessageID, err)
	}
	return got
}

// popWithin pops with a deadline, so a broken queue fails instead of hanging.
func popWithin(t *testing.T, q Queue, d time.Duration) Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	got, err := q.Pop(ctx)
	if err != nil {
		t.Fatalf("pop: %v", err)
	}
	return got
}

func wantLen(t *testing.T, q Queue, want int64) {
	t.Helper()
	n, err := q.Len(t.Context())
	if err != nil {
		t.Fatalf("len: %v", err)
	}
	if n != want {
		t.Fatalf("Len = %d, want %d", n, want)
	}
}

// pushPopOrder pushes (priority, message id) pairs, then pops them all and
// compares the message ids with want.
func pushPopOrder(t *testing.T, q Queue, push []Delivery, want []string) {
	t.Helper()
	for _, d := range push {
		mustPush(t, q, d)
	}
	var got []string
	for range push {
		d := popWithin(t, q, 5*time.Second)
		got = append(got, d.MessageID)
		if err := q.Ack(t.Context(), d); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pop order %v, want %v", got, want)
	}
	wantLen(t, q, 0)
}

func queuePriorityOrder(t *testing.T, newQ newQueueFunc) {
	pushPopOrder(t, newQ(t, 0), []Delivery{
		{MessageID: "low", Priority: 3},
		{MessageID: "medium", Priority: 2},
		{MessageID: "critical", Priority: 0},
		{MessageID: "high", Priority: 1},
	}, []string{"critical", "high", "medium", "low"})
}

func queuePriorityClamped(t *testing.T, newQ newQueueFunc) {
	q := newQ(t, 0)
	tests := []struct {
		in, want int
	}{{-7, 0}, {0, 0}, {2, 2}, {3, 3}, {4, 3}, {1 << 40, 3}}
	for _, tc := range tests {
		d := mustPush(t, q, Delivery{MessageID: fmt.Sprint(tc.in), Priority: tc.in})
		if d.Priority != tc.want {
			t.Errorf("push priority %d: returned %d, want %d", tc.in, d.Priority, tc.want)
		}
		p := popWithin(t, q, 5*time.Second)
		if p.Priority != tc.want || p.MessageID != fmt.Sprint(tc.in) {
			t.Errorf("push priority %d: popped %s with priority %d, want %d", tc.in, p.MessageID, p.Priority, tc.want)
		}
		if err := q.Ack(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	wantLen(t, q, 0)
}

func queueFIFO(t *testing.T, newQ newQueueFunc) {
	pushPopOrder(t, newQ(t, 0), []Delivery{
		{MessageID: "a", Priority: 2},
		{MessageID: "b", Priority: 0},
		{MessageID: "c", Priority: 2},
		{MessageID: "d", Priority: 0},
		{MessageID: "e", Priority: 3},
		{MessageID: "f", Priority: 1},
		{MessageID: "g", Priority: 2},
		{MessageID: "h", Priority: 1},
	}, []string{"b", "d", "f", "h", "a", "c", "g", "e"})
}

func queueFields(t *testing.T, newQ newQueueFunc) {
	q := newQ(t, 0)
	at := time.Date(2025, 11, 23, 10, 0, 0, 123456789, time.UTC)
	body := []byte("{\"x\": \"<&>\"}\x00\xff\n")
	in := Delivery{ID: "ignored", MessageID: "msg-1", Sender: "executor_1", Recipient: "orch_1",
		Priority: 1, Body: body, EnqueuedAt: at, ExpiresAt: at.Add(90 * time.Second), Reclaimed: true}
	pushed := mustPush(t, q, in)
	if pushed.ID == "" || pushed.ID == "ignored" {
		t.Fatalf("push ID = %q, want a new id", pushed.ID)
	}
	if pushed.Reclaimed || !pushed.EnqueuedAt.Equal(at) {
		t.Fatalf("push returned Reclaimed %v EnqueuedAt %v", pushed.Reclaimed, pushed.EnqueuedAt)
	}
	before := time.Now()
	second := mustPush(t, q, Delivery{MessageID: "msg-2", Priority: 1})
	if second.ID == pushed.ID {
		t.Fatalf("two pushes got the same id %q", second.ID)
	}
	if second.EnqueuedAt.Before(before.Add(-time.Second)) || second.EnqueuedAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("zero EnqueuedAt set to %v, want about %v", second.EnqueuedAt, before)
	}
	got := popWithin(t, q, 5*time.Second)
	if got.ID != pushed.ID || got.MessageID != "msg-1" || got.Sender != "executor_1" || got.Recipient != "orch_1" ||
		got.Priority != 1 || !bytes.Equal(got.Body, body) || !got.EnqueuedAt.Equal(at) || !got.ExpiresAt.Equal(at.Add(90*time.Second)) || got.Reclaimed {
		t.Fatalf("popped %+v\nwant %+v", got, pushed)
	}
	got2 := popWithin(t, q, 5*time.Second)
	if got2.ID != second.ID || len(got2.Body) != 0 || !got2.EnqueuedAt.Equal(second.EnqueuedAt) || !got2.ExpiresAt.IsZero() {
		t.Fatalf("second popped %+v, want %+v", got2, second)
	}
}

func queuePopBlocks(t *testing.T, newQ newQueueFunc) {
	q := newQ(t, 0)
	type result struct {
		d   Delivery
		err error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	go func() {
		d, err := q.Pop(ctx)
		done <- result{d, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("Pop on an empty queue returned %+v, %v", r.d, r.err)
	case <-time.After(150 * time.Millisecond):
	}
	mustPush(t, q, Delivery{MessageID: "late", Priority: 2})
	select {
	case r := <-done:
		if r.err != nil || r.d.MessageID != "late" {
			t.Fatalf("Pop = %+v, %v; want message late", r.d, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Pop did not return after a Push")
	}
}

func queuePopCancel(t *testing.T, newQ newQueueFunc) {
	q := newQ(t, 0)
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(100*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"already cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return ctx, cancel
		}, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			d, err := q.Pop(ctx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Pop = %+v, %v; want %v", d, err, tc.want)
			}
			// Redis waits at most one Block (100ms in these tests) past the end.
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("Pop took %v to notice the end of its ctx", el)
			}
		})
	}
	// Nothing was consumed by the cancelled Pops.
	mustPush(t, q, Delivery{MessageID: "after"})
	if d := popWithin(t, q, 5*time.Second); d.MessageID != "after" {
		t.Fatalf("popped %q, want after", d.MessageID)
	}
}

func queueAck(t *testing.T, newQ newQueueFunc) {
	q := newQ(t, 0)
	for i := range 3 {
		mustPush(t, q, Delivery{MessageID: fmt.Sprint(i), Priority: i})
	}
	wantLen(t, q, 3)
	d := popWithin(t, q, 5*time.Second)
	wantLen(t, q, 3) // in flight still counts
	if err := q.Ack(t.Context(), d); err != nil {
		t.Fatalf("ack: %v", err)
	}
	wantLen(t, q, 2)
	if err := q.Ack(t.Context(), d); err != nil {
		t.Fatalf("second ack: %v", err)
	}
	wantLen(t, q, 2)
	// The acked delivery is not handed out again.
	for _, want := range []string{"1", "2"} {
		d := popWithin(t, q, 5*time.Second)
		if d.MessageID != want {
			t.Fatalf("popped %s, want %s", d.MessageID, want)
		}
		if err := q.Ack(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	wantLen(t, q, 0)
}

func queueFull(t *testing.T, newQ newQueueFunc) {
	q := newQ(t, 3)
	for i := range 3 {
		mustPush(t, q, Delivery{MessageID: fmt.Sprint(i), Priority: i})
	}
	if _, err := q.Push(t.Context(), Delivery{MessageID: "over"}); !errors.Is(err, ErrFull) {
		t.Fatalf("push over capacity: %v, want ErrFull", err)
	}
	d := popWithin(t, q, 5*time.Second)
	if _, err := q.Push(t.Context(), Delivery{MessageID: "over"}); !errors.Is(err, ErrFull) {
		t.Fatalf("push with one in flight: %v, want ErrFull (in flight counts)", err)
	}
	if err := q.Ack(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(t.Context(), Delivery{MessageID: "fits"}); err != nil {
		t.Fatalf("push after ack: %v", err)
	}
	wantLen(t, q, 3)
}

// queueConcurrent runs 4 producers and 4 consumers over 2000 messages: each
// is delivered exactly once.
func queueConcurrent(t *testing.T, newQ newQueueFunc) {
	const workers, perWorker = 4, 500
	const total = workers * perWorker
	q := newQ(t, total)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	var mu sync.Mutex
	seen := make(map[string]int, total)
	var received atomic.Int64
	errs := make(chan error, 2*workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				if _, err := q.Push(ctx, Delivery{MessageID: fmt.Sprintf("p%d-%d", w, i), Priority: i % numPriorities}); err != nil {
					errs <- fmt.Errorf("push: %w", err)
					return
				}
			}
		})
		wg.Go(func() {
			for {
				d, err := q.Pop(ctx)
				if err != nil {
					if ctx.Err() == nil || received.Load() < total {
						errs <- fmt.Errorf("pop after %d: %w", received.Load(), err)
					}
					return
				}
				mu.Lock()
				seen[d.MessageID]++
				mu.Unlock()
				if err := q.Ack(ctx, d); err != nil {
					errs <- fmt.Errorf("ack: %w", err)
					return
				}
				if received.Add(1) == total {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(seen) != total {
		t.Fatalf("%d distinct messages delivered, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
	wantLen(t, q, 0)
}

// TestMemoryQueueReclaim: a delivery popped and not acknowledged within
// ClaimIdle is handed out again, marked Reclaimed, before waiting ones (a
// worker that could not record it left it to be retried); one acknowledged
// is not.
func TestMemoryQueueReclaim(t *testing.T) {
	q := NewMemoryQueueWithOptions(MemoryQueueOptions{Capacity: 10, ClaimIdle: time.Minute})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q.now = func() time.Time { return now }
	unacked := mustPush(t, q, Delivery{MessageID: "m1", Recipient: "a", Body: []byte(`{}`)})
	acked := mustPush(t, q, Delivery{MessageID: "m2", Recipient: "a", Body: []byte(`{}`)})
	if d := popWithin(t, q, time.Second); d.ID != unacked.ID || d.Reclaimed {
		t.Fatalf("first pop %+v", d)
	}
	d := popWithin(t, q, time.Second)
	if err := q.Ack(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	later := mustPush(t, q, Delivery{MessageID: "m3", Recipient: "a", Body: []byte(`{}`)})

	now = now.Add(59 * time.Second)
	if d := popWithin(t, q, time.Second); d.ID != later.ID {
		t.Fatalf("before ClaimIdle: popped %s, want the waiting %s", d.MessageID, later.MessageID)
	}
	now = now.Add(2 * time.Second)
	d = popWithin(t, q, time.Second)
	if d.ID != unacked.ID || !d.Reclaimed {
		t.Fatalf("after ClaimIdle: popped %+v, want %s reclaimed", d, unacked.MessageID)
	}
	if d.ID == acked.ID {
		t.Fatal("an acknowledged delivery came back")
	}
	if n, _ := q.Len(t.Context()); n != 2 {
		t.Errorf("Len %d, want 2 in flight (m1 again, m3)", n)
	}
}

// TestMemoryQueueReclaimWakesPop: a Pop waiting on an empty queue returns
// the unacknowledged delivery once ClaimIdle has passed, without a Push.
func TestMemoryQueueReclaimWakesPop(t *testing.T) {
	q := NewMemoryQueueWithOptions(MemoryQueueOptions{ClaimIdle: 50 * time.Millisecond})
	want := mustPush(t, q, Delivery{MessageID: "m1", Recipient: "a", Body: []byte(`{}`)})
	popWithin(t, q, time.Second)
	start := time.Now()
	d := popWithin(t, q, 5*time.Second)
	if d.ID != want.ID || !d.Reclaimed {
		t.Fatalf("popped %+v", d)
	}
	if waited := time.Since(start); waited < 40*time.Millisecond {
		t.Errorf("handed out again after %v, before ClaimIdle", waited)
	}
}
