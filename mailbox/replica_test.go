package mailbox

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"time"
)

// This file tests what lets several replicas share the mailbox: the repeat
// check that is one step with the append, the suspension of threads, the
// dead letters, and the ids the gateway makes. Each behaviour runs on every
// backend (the Redis ones in redis_*_test.go).

// historyDuplicate: Append itself refuses a message_id its sender already
// has in one of the entry's threads, and adds nothing then; another
// sender, another thread, or a retracted message is no repeat.
func historyDuplicate(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{})
	mustAppend(t, h, entry("m1", "W", "C"))
	other := entry("m1", "W2", "")
	other.Sender = "someone_else"
	tests := []struct {
		name string
		e    Entry
		dup  bool
	}{
		{"same thread and sender", entry("m1", "W", "C"), true},
		{"only the workflow thread shared", entry("m1", "W", "C2"), true},
		{"only the correlation thread shared", entry("m1", "", "C"), true},
		{"another thread", entry("m1", "W2", ""), false},
		{"another sender", func() Entry { e := entry("m1", "W", ""); e.Sender = "orch_1"; return e }(), false},
		{"another id", entry("m2", "W", "C"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(mustList(t, h, KeyWorkflow, "W", 0))
			err := h.Append(t.Context(), tc.e)
			if got := errors.Is(err, ErrDuplicate); got != tc.dup || (!tc.dup && err != nil) {
				t.Fatalf("append: %v, want duplicate %v", err, tc.dup)
			}
			if tc.dup {
				if n := len(mustList(t, h, KeyWorkflow, "W", 0)); n != before {
					t.Fatalf("refused append changed W from %d to %d entries", before, n)
				}
				if tc.e.CorrelationID == "C2" {
					if n := len(mustList(t, h, KeyCorrelation, "C2", 0)); n != 0 {
						t.Fatalf("refused append left %d entries in C2", n)
					}
				}
			}
		})
	}
	// Retracted, it may come again.
	e := entry("m9", "W9", "")
	mustAppend(t, h, e)
	if err := h.Retract(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, e)
	if err := h.Append(t.Context(), e); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("append after the retry: %v, want ErrDuplicate", err)
	}
}

// historyDuplicateRace: 16 appends of the same message at once: exactly
// one is stored, the others are ErrDuplicate.
func historyDuplicateRace(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{})
	const n = 16
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		ok, duplicates int
		others         []error
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			err := h.Append(context.Background(), entry("race", "W", "C"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrDuplicate):
				duplicates++
			default:
				others = append(others, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if ok != 1 || duplicates != n-1 || len(others) != 0 {
		t.Fatalf("%d stored, %d duplicates, other errors %v; want 1 and %d", ok, duplicates, others, n-1)
	}
	for _, k := range [][2]string{{KeyWorkflow, "W"}, {KeyCorrelation, "C"}} {
		if got := len(mustList(t, h, k[0], k[1], 0)); got != 1 {
			t.Errorf("%s %s holds %d entries, want 1", k[0], k[1], got)
		}
	}
}

// historyBatch: the entries of one message (a group send's deliveries)
// are appended together, counted together against MaxPerThread, refused
// together as a repeat, and retracted together.
func historyBatch(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{MaxPerThread: 4})
	a, b := entry("g1", "W", ""), entry("g1", "W", "")
	a.Recipients, a.DeliveryID, a.Group = []string{"x"}, "d-a", "executor"
	b.Recipients, b.DeliveryID, b.Group = []string{"y"}, "d-b", "executor"
	if err := h.Append(t.Context(), a, b); err != nil {
		t.Fatal(err)
	}
	got := mustList(t, h, KeyWorkflow, "W", 0)
	if !reflect.DeepEqual(got, []Entry{a, b}) {
		t.Fatalf("thread %+v", got)
	}
	if err := h.Append(t.Context(), b); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("one delivery again: %v, want ErrDuplicate", err)
	}
	// Three more would make 5 > 4: none goes in.
	if err := h.Append(t.Context(), entry("g2", "W", ""), entry("g2", "W", ""), entry("g2", "W", "")); !errors.Is(err, ErrFull) {
		t.Fatalf("over MaxPerThread: %v, want ErrFull", err)
	}
	if n := len(mustList(t, h, KeyWorkflow, "W", 0)); n != 2 {
		t.Fatalf("refused batch left %d entries", n)
	}
	if err := h.Append(t.Context(), entry("x1", "W", ""), entry("x2", "W2", "")); err == nil {
		t.Fatal("entries of different threads appended as one")
	}
	if err := h.Retract(t.Context(), a, b); err != nil {
		t.Fatal(err)
	}
	if n := len(mustList(t, h, KeyWorkflow, "W", 0)); n != 0 {
		t.Fatalf("%d entries after retracting the batch", n)
	}
	if seen, err := h.Seen(t.Context(), KeyWorkflow, "W", a.Sender, "g1"); err != nil || seen {
		t.Fatalf("Seen after retracting the batch: %v %v", seen, err)
	}
	if err := h.Append(t.Context()); err != nil {
		t.Fatalf("empty append: %v", err)
	}
}

// historySuspension: a thread is suspended once (the first suspension
// stays), only the decision on its own escalation resumes it, and other
// threads are not affected.
func historySuspension(t *testing.T, newH newHistoryFunc) {
	h := newH(t, HistoryOptions{})
	ctx := t.Context()
	at := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	first := Suspension{Kind: KeyWorkflow, ID: "W", EscalationID: "esc_1", MessageID: "m1", Sender: "planner", At: at}
	got, created, err := h.Suspend(ctx, first)
	if err != nil || !created || !got.At.Equal(at) || got.EscalationID != "esc_1" {
		t.Fatalf("first suspend: %+v %v %v", got, created, err)
	}
	second := first
	second.EscalationID, second.MessageID = "esc_2", "m2"
	got, created, err = h.Suspend(ctx, second)
	if err != nil || created || got.EscalationID != "esc_1" || got.MessageID != "m1" || got.Sender != "planner" {
		t.Fatalf("second suspend: %+v %v %v; want the first kept", got, created, err)
	}
	tests := []struct {
		kind, id string
		want     bool
	}{
		{KeyWorkflow, "W", true},
		{KeyCorrelation, "W", false},
		{KeyWorkflow, "W2", false},
	}
	for _, tc := range tests {
		s, ok, err := h.Suspended(ctx, tc.kind, tc.id)
		if err != nil || ok != tc.want || (ok && s.EscalationID != "esc_1") {
			t.Errorf("Suspended(%s %s) = %+v %v %v, want %v", tc.kind, tc.id, s, ok, err, tc.want)
		}
	}
	if ok, err := h.Resume(ctx, KeyWorkflow, "W", "esc_2"); err != nil || ok {
		t.Fatalf("resume by another escalation: %v %v", ok, err)
	}
	if _, ok, _ := h.Suspended(ctx, KeyWorkflow, "W"); !ok {
		t.Fatal("another escalation's decision resumed the thread")
	}
	if ok, err := h.Resume(ctx, KeyWorkflow, "W", "esc_1"); err != nil || !ok {
		t.Fatalf("resume: %v %v", ok, err)
	}
	if _, ok, _ := h.Suspended(ctx, KeyWorkflow, "W"); ok {
		t.Fatal("still suspended after its resume")
	}
	if ok, err := h.Resume(ctx, KeyWorkflow, "W", "esc_1"); err != nil || ok {
		t.Fatalf("second resume: %v %v", ok, err)
	}
	// Free again: a new suspension is stored.
	if _, created, err := h.Suspend(ctx, second); err != nil || !created {
		t.Fatalf("suspend after resume: %v %v", created, err)
	}
	for _, bad := range []Suspension{
		{Kind: "thread", ID: "W", EscalationID: "e"},
		{Kind: KeyWorkflow, ID: "", EscalationID: "e"},
		{Kind: KeyWorkflow, ID: "W3"},
	} {
		if _, _, err := h.Suspend(ctx, bad); err == nil {
			t.Errorf("suspend %+v accepted", bad)
		}
	}
	if _, _, err := h.Suspended(ctx, "nope", "W"); err == nil {
		t.Error("unknown kind accepted")
	}
}

// TestMemoryHistorySuspensionExpires: a suspension expires with the
// thread's retention.
func TestMemoryHistorySuspensionExpires(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := NewMemoryHistory(HistoryOptions{Retention: time.Hour})
	h.now = clock.now
	if _, _, err := h.Suspend(t.Context(), Suspension{Kind: KeyWorkflow, ID: "W", EscalationID: "e"}); err != nil {
		t.Fatal(err)
	}
	clock.advance(time.Hour - time.Nanosecond)
	if _, ok, _ := h.Suspended(t.Context(), KeyWorkflow, "W"); !ok {
		t.Fatal("expired early")
	}
	clock.advance(time.Nanosecond)
	if _, ok, _ := h.Suspended(t.Context(), KeyWorkflow, "W"); ok {
		t.Fatal("kept past its retention")
	}
}

// queueDeadLetter: a popped delivery given up goes to the dead letters
// (newest first) and leaves the queue; one acknowledged, or buried
// already, is not buried again.
func queueDeadLetter(t *testing.T, newQ newQueueFunc) {
	q := newQ(t, 0)
	for i := range 3 {
		mustPush(t, q, Delivery{MessageID: fmt.Sprint("m", i), Sender: "s", Recipient: "r", Priority: 2, Body: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	d0 := popWithin(t, q, 5*time.Second)
	d1 := popWithin(t, q, 5*time.Second)
	if err := q.DeadLetter(t.Context(), d0, "delivery_failed: unreachable after 3 attempt(s)"); err != nil {
		t.Fatal(err)
	}
	if err := q.DeadLetter(t.Context(), d1, "not_an_envelope"); err != nil {
		t.Fatal(err)
	}
	if err := q.DeadLetter(t.Context(), d1, "again"); err != nil {
		t.Fatal(err)
	}
	d2 := popWithin(t, q, 5*time.Second)
	if err := q.Ack(t.Context(), d2); err != nil {
		t.Fatal(err)
	}
	if err := q.DeadLetter(t.Context(), d2, "after ack"); err != nil {
		t.Fatal(err)
	}
	wantLen(t, q, 0)
	dead, err := q.DeadLetters(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 {
		t.Fatalf("%d dead letters, want 2: %+v", len(dead), dead)
	}
	if got := dead[0]; got.Reason != "not_an_envelope" || got.Delivery.MessageID != "m1" || got.Delivery.DeliveryID != d1.DeliveryID ||
		string(got.Delivery.Body) != `{"n":1}` || got.Delivery.Recipient != "r" || got.Delivery.Deliveries != 1 || time.Since(got.At) > time.Minute {
		t.Errorf("newest dead letter %+v", got)
	}
	if dead[1].Delivery.MessageID != "m0" || dead[1].Reason != "delivery_failed: unreachable after 3 attempt(s)" {
		t.Errorf("oldest dead letter %+v", dead[1])
	}
	if one, err := q.DeadLetters(t.Context(), 1); err != nil || len(one) != 1 || one[0].Delivery.MessageID != "m1" {
		t.Errorf("limit 1: %+v %v", one, err)
	}
}

// queueDeliveryID: Push gives a delivery a UUIDv4 unless it has an id of
// the gateway's already, Pop returns it and counts the hand-out.
func queueDeliveryID(t *testing.T, newQ newQueueFunc) {
	q := newQ(t, 0)
	a := mustPush(t, q, Delivery{MessageID: "a"})
	b := mustPush(t, q, Delivery{MessageID: "b", DeliveryID: "kept-as-given", Deliveries: 7})
	if !uuidV4.MatchString(a.DeliveryID) || b.DeliveryID != "kept-as-given" || b.Deliveries != 0 {
		t.Fatalf("pushed %q %q (deliveries %d)", a.DeliveryID, b.DeliveryID, b.Deliveries)
	}
	for _, want := range []Delivery{a, b} {
		got := popWithin(t, q, 5*time.Second)
		if got.DeliveryID != want.DeliveryID || got.Deliveries != 1 {
			t.Errorf("popped %q with %d deliveries, want %q with 1", got.DeliveryID, got.Deliveries, want.DeliveryID)
		}
	}
}

// TestMemoryQueueMaxDeliveries: a delivery handed out MaxDeliveries times
// without an Ack is not handed out again: the next reclaim buries it.
func TestMemoryQueueMaxDeliveries(t *testing.T) {
	q := NewMemoryQueueWithOptions(MemoryQueueOptions{ClaimIdle: time.Minute, MaxDeliveries: 3, DeadLetterMax: 2})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q.now = func() time.Time { return now }
	pushed := mustPush(t, q, Delivery{MessageID: "poison", Body: []byte(`{}`)})
	for want := 1; want <= 3; want++ {
		d := popWithin(t, q, time.Second)
		if d.ID != pushed.ID || d.Deliveries != want || d.Reclaimed != (want > 1) {
			t.Fatalf("hand-out %d: %+v", want, d)
		}
		now = now.Add(2 * time.Minute)
	}
	// The fourth hand-out would exceed MaxDeliveries: buried, the Pop
	// waits for something else.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if d, err := q.Pop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("popped %+v %v after MaxDeliveries", d, err)
	}
	wantLen(t, q, 0)
	dead, err := q.DeadLetters(t.Context(), 0)
	if err != nil || len(dead) != 1 || dead[0].Delivery.DeliveryID != pushed.DeliveryID || dead[0].Delivery.Deliveries != 3 ||
		dead[0].Reason != "handed out 3 times without being acknowledged" {
		t.Fatalf("dead letters %+v %v", dead, err)
	}
	// The list is capped: the oldest go.
	for i := range 3 {
		d := popAfterPush(t, q, fmt.Sprint("x", i))
		if err := q.DeadLetter(t.Context(), d, "r"); err != nil {
			t.Fatal(err)
		}
	}
	dead, _ = q.DeadLetters(t.Context(), 0)
	if len(dead) != 2 || dead[0].Delivery.MessageID != "x2" || dead[1].Delivery.MessageID != "x1" {
		t.Fatalf("capped list %+v", dead)
	}
}

func popAfterPush(t *testing.T, q Queue, id string) Delivery {
	t.Helper()
	mustPush(t, q, Delivery{MessageID: id})
	return popWithin(t, q, 5*time.Second)
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestNewID: UUIDv4 in the 8-4-4-4-12 form with the version and variant
// bits set, and no two alike.
func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if !uuidV4.MatchString(id) {
			t.Fatalf("%q is not a UUIDv4", id)
		}
		if seen[id] {
			t.Fatalf("%q made twice", id)
		}
		seen[id] = true
	}
}
