package mailbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/testredis"
)

func newRedisQueue(t testing.TB, c redis.UniversalClient, o RedisQueueOptions) *RedisQueue {
	t.Helper()
	q, err := NewRedisQueue(c, o)
	if err != nil {
		t.Fatalf("new redis queue: %v", err)
	}
	return q
}

// testPrefix gives each test its own keys on a shared server.
func testPrefix(t testing.TB) string { return "{" + t.Name() + "}" }

func TestRedisQueue(t *testing.T) {
	srv := testredis.Start(t)
	runQueueBehaviours(t, func(t *testing.T, capacity int) Queue {
		return newRedisQueue(t, srv.Client(t), RedisQueueOptions{
			Prefix: testPrefix(t), Consumer: "c1", MaxLen: int64(capacity), Block: 100 * time.Millisecond,
		})
	})
}

// The streams and group are where the design says, so an operator can
// inspect them with redis-cli.
func TestRedisQueueLayout(t *testing.T) {
	srv := testredis.Start(t)
	c := srv.Client(t)
	q := newRedisQueue(t, c, RedisQueueOptions{})
	for p := range numPriorities {
		key := fmt.Sprintf("{gw:mbox}:q:%d", p)
		groups, err := c.XInfoGroups(t.Context(), key).Result()
		if err != nil {
			t.Fatalf("xinfo groups %s: %v", key, err)
		}
		if len(groups) != 1 || groups[0].Name != "gateway" {
			t.Fatalf("%s groups %+v, want one named gateway", key, groups)
		}
	}
	d := mustPush(t, q, Delivery{MessageID: "m", Sender: "s", Recipient: "r", Priority: 2, Body: []byte("b")})
	vals, err := c.XRange(t.Context(), "{gw:mbox}:q:2", "-", "+").Result()
	if err != nil || len(vals) != 1 || vals[0].ID != d.ID {
		t.Fatalf("stream q:2 = %+v, %v; want entry %s", vals, err, d.ID)
	}
	for _, f := range []string{"did", "mid", "from", "to", "at", "body"} {
		if _, ok := vals[0].Values[f]; !ok {
			t.Errorf("entry lacks field %q: %v", f, vals[0].Values)
		}
	}
	// A second NewRedisQueue on existing streams is fine (BUSYGROUP ignored).
	newRedisQueue(t, c, RedisQueueOptions{})
}

// A consumer that pops and dies without Ack loses nothing: after ClaimIdle
// another consumer gets the delivery, marked Reclaimed.
func TestRedisQueueReclaim(t *testing.T) {
	srv := testredis.Start(t)
	prefix := testPrefix(t)
	a := newRedisQueue(t, srv.Client(t), RedisQueueOptions{Prefix: prefix, Consumer: "a"})
	b := newRedisQueue(t, srv.Client(t), RedisQueueOptions{
		Prefix: prefix, Consumer: "b", ClaimIdle: 200 * time.Millisecond, Block: 50 * time.Millisecond,
	})
	pushed := mustPush(t, a, Delivery{MessageID: "m1", Priority: 1, Body: []byte("hello")})
	got := popWithin(t, a, 5*time.Second)
	if got.ID != pushed.ID || got.Reclaimed {
		t.Fatalf("a popped %+v", got)
	}
	popped := time.Now()
	// a "crashes": no Ack. Before ClaimIdle, b finds nothing.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if d, err := b.Pop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b popped %+v, %v before ClaimIdle", d, err)
	}
	re := popWithin(t, b, 5*time.Second)
	if el := time.Since(popped); el < 200*time.Millisecond {
		t.Fatalf("reclaimed after %v, before ClaimIdle", el)
	}
	if !re.Reclaimed || re.ID != pushed.ID || re.MessageID != "m1" || string(re.Body) != "hello" || re.Priority != 1 ||
		!re.EnqueuedAt.Equal(pushed.EnqueuedAt) {
		t.Fatalf("b got %+v, want %+v reclaimed", re, pushed)
	}
	wantLen(t, b, 1)
	if err := b.Ack(t.Context(), re); err != nil {
		t.Fatal(err)
	}
	wantLen(t, b, 0)
	// Acked: nobody gets it again.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel2()
	if d, err := b.Pop(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after ack b popped %+v, %v", d, err)
	}
}

// Reclaiming drains a dead consumer's whole backlog, not one entry per
// sweep interval.
func TestRedisQueueReclaimBacklog(t *testing.T) {
	srv := testredis.Start(t)
	prefix := testPrefix(t)
	a := newRedisQueue(t, srv.Client(t), RedisQueueOptions{Prefix: prefix, Consumer: "a"})
	const n = 25 // more than one XAUTOCLAIM COUNT 1 scan (10 entries)
	for i := range n {
		mustPush(t, a, Delivery{MessageID: fmt.Sprint(i), Priority: i % numPriorities})
		popWithin(t, a, 5*time.Second)
	}
	time.Sleep(150 * time.Millisecond)
	b := newRedisQueue(t, srv.Client(t), RedisQueueOptions{
		Prefix: prefix, Consumer: "b", ClaimIdle: 100 * time.Millisecond, Block: 50 * time.Millisecond,
	})
	start := time.Now()
	seen := map[string]bool{}
	for range n {
		d := popWithin(t, b, 5*time.Second)
		if !d.Reclaimed || seen[d.MessageID] {
			t.Fatalf("got %+v (seen before: %v)", d, seen[d.MessageID])
		}
		seen[d.MessageID] = true
		if err := b.Ack(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	// One sweep interval is ClaimIdle/2 = 50ms; 25 entries one per interval
	// would take over a second.
	if el := time.Since(start); el > time.Second {
		t.Fatalf("reclaiming %d entries took %v", n, el)
	}
	wantLen(t, b, 0)
}

// Two replicas on the same prefix never hand out the same entry.
func TestRedisQueueTwoReplicas(t *testing.T) {
	srv := testredis.Start(t)
	prefix := testPrefix(t)
	opts := func(name string) RedisQueueOptions {
		return RedisQueueOptions{Prefix: prefix, Consumer: name, Block: 50 * time.Millisecond}
	}
	replicas := []*RedisQueue{
		newRedisQueue(t, srv.Client(t), opts("r1")),
		newRedisQueue(t, srv.Client(t), opts("r2")),
	}
	const total = 1000
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	byEntry := map[string]string{} // entry id -> replica
	perReplica := map[string]int{}
	acked := 0
	var wg sync.WaitGroup
	for i, q := range replicas {
		for range 2 {
			wg.Go(func() {
				for {
					d, err := q.Pop(ctx)
					if err != nil {
						return
					}
					name := fmt.Sprint("r", i+1)
					mu.Lock()
					// Entry ids are unique per stream, i.e. per priority.
					key := fmt.Sprint(d.Priority, "/", d.ID)
					if prev, dup := byEntry[key]; dup {
						t.Errorf("entry %s handed to %s and %s", key, prev, name)
					}
					byEntry[key] = name
					perReplica[name]++
					mu.Unlock()
					if err := q.Ack(ctx, d); err != nil {
						t.Errorf("ack: %v", err)
					}
					// Stop once every entry is acknowledged (not merely
					// handed out: another worker may still be acking).
					mu.Lock()
					acked++
					done := acked == total
					mu.Unlock()
					if done {
						cancel()
					}
				}
			})
		}
	}
	for i := range total {
		if _, err := replicas[i%2].Push(ctx, Delivery{MessageID: fmt.Sprint(i), Priority: i % numPriorities}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if len(byEntry) != total {
		t.Fatalf("%d entries delivered, want %d", len(byEntry), total)
	}
	if perReplica["r1"] == 0 || perReplica["r2"] == 0 {
		t.Errorf("work split %v: one replica got nothing", perReplica)
	}
	wantLen(t, replicas[0], 0)
}

// A restarted process (a new RedisQueue, new consumer name) delivers what
// was pushed and never popped, in priority order; what the old process
// popped without Ack comes back after ClaimIdle.
func TestRedisQueueSurvivesRestart(t *testing.T) {
	srv := testredis.Start(t)
	prefix := testPrefix(t)
	old := newRedisQueue(t, srv.Client(t), RedisQueueOptions{Prefix: prefix, Consumer: "old"})
	for i, p := range []int{3, 0, 2, 1} {
		mustPush(t, old, Delivery{MessageID: fmt.Sprint("m", i), Priority: p})
	}
	inflight := popWithin(t, old, 5*time.Second) // m1 (critical), never acked
	if inflight.MessageID != "m1" {
		t.Fatalf("old popped %s, want m1", inflight.MessageID)
	}

	fresh := newRedisQueue(t, srv.Client(t), RedisQueueOptions{
		Prefix: prefix, Consumer: "new", ClaimIdle: 300 * time.Millisecond, Block: 50 * time.Millisecond,
	})
	wantLen(t, fresh, 4)
	var got []string
	for range 4 {
		d := popWithin(t, fresh, 5*time.Second)
		got = append(got, fmt.Sprint(d.MessageID, ":", d.Reclaimed))
		if err := fresh.Ack(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	want := "[m3:false m2:false m0:false m1:true]"
	if fmt.Sprint(got) != want {
		t.Fatalf("after restart popped %v, want %s", got, want)
	}
	wantLen(t, fresh, 0)
}

// Redis restarting empty (streams and group gone) does not wedge the
// queue: Pop recreates the group and delivers what was pushed since.
func TestRedisQueueRedisLostData(t *testing.T) {
	srv := testredis.Start(t)
	q := newRedisQueue(t, srv.Client(t), RedisQueueOptions{Prefix: testPrefix(t), Consumer: "c", Block: 50 * time.Millisecond})
	srv.Restart()
	var err error
	for range 50 { // the client reconnects on its own
		if _, err = q.Push(t.Context(), Delivery{MessageID: "after-restart", Priority: 2}); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("push after restart: %v", err)
	}
	d := popWithin(t, q, 5*time.Second)
	if d.MessageID != "after-restart" {
		t.Fatalf("popped %+v", d)
	}
	if err := q.Ack(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	wantLen(t, q, 0)
}

func TestRedisQueueAckWithoutID(t *testing.T) {
	srv := testredis.Start(t)
	q := newRedisQueue(t, srv.Client(t), RedisQueueOptions{Prefix: testPrefix(t)})
	if err := q.Ack(t.Context(), Delivery{}); err == nil {
		t.Fatal("Ack of a delivery without id succeeded")
	}
	if _, err := NewRedisQueue(nil, RedisQueueOptions{}); err == nil {
		t.Fatal("NewRedisQueue(nil) succeeded")
	}
}

// The hand-out count of a delivery lives in Redis: it survives reclaims by
// other replicas, and the claim that would exceed MaxDeliveries buries the
// delivery in <prefix>:dead instead of handing it out.
func TestRedisQueueMaxDeliveries(t *testing.T) {
	srv := testredis.Start(t)
	c := srv.Client(t)
	prefix := testPrefix(t)
	opts := func(name string) RedisQueueOptions {
		return RedisQueueOptions{Prefix: prefix, Consumer: name, ClaimIdle: 100 * time.Millisecond, Block: 50 * time.Millisecond,
			MaxDeliveries: 3, DeadLetterMax: 2}
	}
	replicas := []*RedisQueue{newRedisQueue(t, c, opts("a")), newRedisQueue(t, srv.Client(t), opts("b")), newRedisQueue(t, srv.Client(t), opts("c"))}
	pushed := mustPush(t, replicas[0], Delivery{MessageID: "poison", Priority: 1, Body: []byte(`{"x":1}`)})
	for i, q := range replicas {
		d := popWithin(t, q, 5*time.Second)
		if d.ID != pushed.ID || d.DeliveryID != pushed.DeliveryID || d.Deliveries != i+1 || d.Reclaimed != (i > 0) {
			t.Fatalf("hand-out %d by %s: %+v", i+1, q.consumer, d)
		}
	}
	// The fourth claim buries it.
	ctx, cancel := context.WithTimeout(t.Context(), 600*time.Millisecond)
	defer cancel()
	if d, err := replicas[0].Pop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("popped %+v %v after MaxDeliveries", d, err)
	}
	wantLen(t, replicas[0], 0)
	dead, err := replicas[1].DeadLetters(t.Context(), 0)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters %+v %v", dead, err)
	}
	if d := dead[0]; d.Delivery.DeliveryID != pushed.DeliveryID || d.Delivery.Deliveries != 3 || d.Delivery.Priority != 1 ||
		string(d.Delivery.Body) != `{"x":1}` || !d.Delivery.EnqueuedAt.Equal(pushed.EnqueuedAt) || d.Reason != "handed out 3 times without being acknowledged" {
		t.Fatalf("dead letter %+v", d)
	}
	if n, err := c.HLen(t.Context(), prefix+":qn").Result(); err != nil || n != 0 {
		t.Errorf("hand-out counts left: %d %v", n, err)
	}
	// Capped at DeadLetterMax, newest first.
	for i := range 3 {
		d := popAfterPush(t, replicas[2], fmt.Sprint("x", i))
		if err := replicas[2].DeadLetter(t.Context(), d, "given up"); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := c.LLen(t.Context(), prefix+":dead").Result(); n != 2 {
		t.Errorf("dead-letter list holds %d, want 2", n)
	}
	dead, _ = replicas[0].DeadLetters(t.Context(), 0)
	if len(dead) != 2 || dead[0].Delivery.MessageID != "x2" || dead[1].Delivery.MessageID != "x1" {
		t.Fatalf("capped list %+v", dead)
	}
	// An acked delivery leaves no count behind.
	d := popAfterPush(t, replicas[0], "fine")
	if err := replicas[0].Ack(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.HLen(t.Context(), prefix+":qn").Result(); n != 0 {
		t.Errorf("%d hand-out counts after an ack", n)
	}
	if err := replicas[0].DeadLetter(t.Context(), Delivery{}, "x"); err == nil {
		t.Error("dead letter without an id accepted")
	}
}

// A record in the dead-letter list that is not one of ours is listed as
// unreadable, not taken for a delivery and not hiding the others.
func TestRedisQueueDeadLetterUnreadable(t *testing.T) {
	srv := testredis.Start(t)
	c := srv.Client(t)
	q := newRedisQueue(t, c, RedisQueueOptions{Prefix: testPrefix(t), Block: 50 * time.Millisecond})
	d := popAfterPush(t, q, "ok")
	if err := q.DeadLetter(t.Context(), d, "given up"); err != nil {
		t.Fatal(err)
	}
	if err := c.LPush(t.Context(), testPrefix(t)+":dead", "not json").Err(); err != nil {
		t.Fatal(err)
	}
	dead, err := q.DeadLetters(t.Context(), 0)
	if err != nil || len(dead) != 2 || dead[0].Delivery.MessageID != "" || !strings.HasPrefix(dead[0].Reason, "unreadable") || dead[1].Delivery.MessageID != "ok" {
		t.Fatalf("%+v %v", dead, err)
	}
}
