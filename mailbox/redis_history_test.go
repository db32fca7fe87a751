package mailbox

import (
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
