package mailbox

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testredis"
)

func TestRedisHistory(t *testing.T) {
	srv := testredis.Start(t)
	runHistoryBehaviours(t, func(t *testing.T, o HistoryOptions) History {
		o.Prefix = testPrefix(t)
		return NewRedisHistory(srv.Client(t), o)
	})
}

// Each thread key expires Retention after its last append.
func TestRedisHistoryRetention(t *testing.T) {
	srv := testredis.Start(t)
	c := srv.Client(t)
	prefix := testPrefix(t)
	h := NewRedisHistory(c, HistoryOptions{Prefix: prefix, Retention: 2 * time.Second})
	mustAppend(t, h, entry("1", "W", "C"))
	for _, key := range []string{prefix + ":h:workflow:W", prefix + ":h:correlation:C"} {
		ttl, err := c.PTTL(t.Context(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= time.Second || ttl > 2*time.Second {
			t.Fatalf("PTTL %s = %v, want within (1s, 2s]", key, ttl)
		}
	}
	time.Sleep(1200 * time.Millisecond)
	mustAppend(t, h, entry("2", "W", "")) // refreshes W only
	ttlW, _ := c.PTTL(t.Context(), prefix+":h:workflow:W").Result()
	ttlC, _ := c.PTTL(t.Context(), prefix+":h:correlation:C").Result()
	if ttlW <= 1500*time.Millisecond || ttlC > time.Second {
		t.Fatalf("after a W append PTTL W %v C %v; want W refreshed, C not", ttlW, ttlC)
	}
	time.Sleep(1000 * time.Millisecond)
	if n := len(mustList(t, h, KeyCorrelation, "C", 0)); n != 0 {
		t.Fatalf("C holds %d after its retention", n)
	}
	if n := len(mustList(t, h, KeyWorkflow, "W", 0)); n != 2 {
		t.Fatalf("W holds %d, want 2", n)
	}
}

func TestRedisHistoryDefaults(t *testing.T) {
	srv := testredis.Start(t)
	c := srv.Client(t)
	h := NewRedisHistory(c, HistoryOptions{})
	mustAppend(t, h, entry("1", "W", ""))
	ttl, err := c.PTTL(t.Context(), "{gw:mbox}:h:workflow:W").Result()
	if err != nil || ttl <= 7*24*time.Hour-time.Minute || ttl > 7*24*time.Hour {
		t.Fatalf("PTTL = %v, %v; want about 7 days", ttl, err)
	}
}

// Two replicas (two clients on one prefix) share the repeat check and the
// suspensions: 16 appends of one message spread over both store it once,
// and a suspension one makes the other sees and can lift. The suspension
// key expires with the thread's retention.
func TestRedisHistoryReplicas(t *testing.T) {
	srv := testredis.Start(t)
	prefix := testPrefix(t)
	o := HistoryOptions{Prefix: prefix, Retention: time.Hour}
	replicas := []*RedisHistory{NewRedisHistory(srv.Client(t), o), NewRedisHistory(srv.Client(t), o)}
	var wg sync.WaitGroup
	var stored, dup atomic.Int64
	start := make(chan struct{})
	for i := range 16 {
		wg.Go(func() {
			<-start
			switch err := replicas[i%2].Append(context.Background(), entry("same", "W", "")); {
			case err == nil:
				stored.Add(1)
			case errors.Is(err, ErrDuplicate):
				dup.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if stored.Load() != 1 || dup.Load() != 15 {
		t.Fatalf("%d stored, %d duplicates", stored.Load(), dup.Load())
	}
	if _, created, err := replicas[0].Suspend(t.Context(), Suspension{Kind: KeyWorkflow, ID: "W", EscalationID: "esc_9"}); err != nil || !created {
		t.Fatalf("suspend: %v %v", created, err)
	}
	if s, ok, err := replicas[1].Suspended(t.Context(), KeyWorkflow, "W"); err != nil || !ok || s.EscalationID != "esc_9" {
		t.Fatalf("the other replica sees %+v %v %v", s, ok, err)
	}
	ttl, err := srv.Client(t).PTTL(t.Context(), prefix+":hs:workflow:W").Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("suspension PTTL %v %v, want about an hour", ttl, err)
	}
	if ok, err := replicas[1].Resume(t.Context(), KeyWorkflow, "W", "esc_9"); err != nil || !ok {
		t.Fatalf("resume on the other replica: %v %v", ok, err)
	}
	if _, ok, _ := replicas[0].Suspended(t.Context(), KeyWorkflow, "W"); ok {
		t.Fatal("still suspended for the first replica")
	}
	// A stored suspension of a shape this code did not write is an error,
	// not a thread that looks free or one nobody can resume.
	if err := srv.Client(t).Set(t.Context(), prefix+":hs:workflow:X", `{"kind":"workflow","id":"X"}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := replicas[0].Suspended(t.Context(), KeyWorkflow, "X"); err == nil {
		t.Error("a suspension without an escalation id was read")
	}
}
