package testredis

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("ping after start: %v", err)
	}
	s.Stop()
	if err := ping(s.Addr()); err == nil {
		t.Fatal("ping answered after stop")
	}
	s.Stop() // idempotent
	s.Restart()
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("ping after restart: %v", err)
	}
	if got, want := s.URL(), "redis://"+s.Addr()+"/0"; got != want {
		t.Fatalf("URL %q, want %q", got, want)
	}
}

// Slot agrees with CLUSTER KEYSLOT of a real Cluster, hash tags included
// (the examples of the Redis Cluster specification among them).
func TestSlotMatchesClusterKeyslot(t *testing.T) {
	c := StartCluster(t)
	cl := c.Client(t)
	keys := []string{"", "a", "foo", "123456789", "{user1000}.following", "{user1000}.followers", "foo{}{bar}",
		"foo{{bar}}zap", "foo{bar}{zap}", "{gw:approval}:rec:x", "{gw:mbox}:q:0", "gw:rl:agent:a1", "{", "}{", "a{b", "{}", "ünï{cödé}"}
	for i := range 200 {
		keys = append(keys, "gw:budget:agent-"+strconv.Itoa(i))
	}
	for _, k := range keys {
		want, err := cl.ClusterKeySlot(t.Context(), k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT %d", k, got, want)
		}
	}
}

// The cluster serves every slot through a cluster client: keys that share
// a tag go in one transaction, keys spread over the three masters each to
// their own.
func TestClusterServesAllSlots(t *testing.T) {
	c := StartCluster(t)
	cl := c.Client(t)
	ctx := t.Context()
	for i := range 30 {
		k := "k" + strconv.Itoa(i)
		if err := cl.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	if _, err := cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "{t}:a", 1, 0)
		p.Set(ctx, "{t}:b", 2, 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range 30 {
		seen[c.NodeOf(t, "k"+strconv.Itoa(i)).Addr()] = true
	}
	if len(seen) != 3 {
		t.Fatalf("keys on %d masters, want 3", len(seen))
	}
}

// The Sentinels name the primary, and after it is killed, the replica.
func TestSentinelFailover(t *testing.T) {
	s := StartSentinel(t)
	first := s.Primary(t)
	if first != s.Data[0] {
		t.Fatalf("primary %s, want %s", first.Addr(), s.Data[0].Addr())
	}
	first.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for s.Primary(t) == first {
		if time.Now().After(deadline) {
			t.Fatal("no failover within 20s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A step a Cluster would refuse fails the test on a single node too.
func TestSlotCheckCatchesCrossSlot(t *testing.T) {
	var rec recorder
	for _, args := range [][]any{
		{"evalsha", "abc", "2", "{a}:x", "{b}:y"},
		{"mget", "x", "y"},
		{"xreadgroup", "GROUP", "g", "c", "STREAMS", "s1", "s2", ">", ">"},
	} {
		rec.failed = false
		slotCheck{&rec}.check("test", CommandKeys(args))
		if !rec.failed {
			t.Errorf("%v: no failure", args)
		}
	}
	rec.failed = false
	slotCheck{&rec}.check("test", CommandKeys([]any{"evalsha", "abc", "2", "{a}:x", "{a}:y"}))
	if rec.failed {
		t.Error("same tag: failure")
	}
}

type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }

// A missing binary fails the run that requires Redis and skips elsewhere.
func TestRequired(t *testing.T) {
	for env, want := range map[string]bool{
		"": false, "CI=true": true, "CI=0": false, "CI=false": false,
		"GATEWAY_REQUIRE_REDIS=1": true, "GATEWAY_REQUIRE_HELM=1": false,
	} {
		k, v, _ := strings.Cut(env, "=")
		got := Required(func(name string) string {
			if name == k {
				return v
			}
			return ""
		}) != ""
		if got != want {
			t.Errorf("%q: required %v, want %v", env, got, want)
		}
	}
}
