package proxy_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/testredis"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/proxy"
)

// clock is a settable time for the memory store.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// responseStores are both backends, each with a way to let time pass by d
// (the memory store's clock; real time for Redis, which expires keys by
// itself).
func responseStores(t *testing.T) map[string]struct {
	store proxy.ResponseStore
	pass  func(d time.Duration)
} {
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	srv := testredis.Start(t)
	client, err := limit.NewRedisClient(srv.URL(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return map[string]struct {
		store proxy.ResponseStore
		pass  func(d time.Duration)
	}{
		"memory": {proxy.NewMemoryResponseStore(proxy.MemoryResponseStoreOptions{Now: c.Now}), c.Add},
		"redis":  {proxy.NewRedisResponseStore(client, "t:"+t.Name()+":", time.Second), time.Sleep},
	}
}

// TestResponseStoreContract: both backends keep a conversation per (agent,
// id), give it only to that agent, replace it on a second Put, and forget
// it at its TTL.
func TestResponseStoreContract(t *testing.T) {
	ctx := context.Background()
	for name, b := range responseStores(t) {
		t.Run(name, func(t *testing.T) {
			s := b.store
			if _, err := s.Get(ctx, "alice", "resp_1"); !errors.Is(err, proxy.ErrResponseNotFound) {
				t.Fatalf("empty store: %v", err)
			}
			if err := s.Put(ctx, "alice", "resp_1", []byte(`{"a":1}`), time.Hour); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(ctx, "alice", "resp_1"); err != nil || string(got) != `{"a":1}` {
				t.Fatalf("get %q %v", got, err)
			}
			for _, other := range []struct{ agent, id string }{{"bob", "resp_1"}, {"alice", "resp_2"}, {"alice:resp", "1"}, {"", "alice:resp_1"}} {
				if got, err := s.Get(ctx, other.agent, other.id); !errors.Is(err, proxy.ErrResponseNotFound) {
					t.Errorf("(%q, %q) got %q, %v: another key's value", other.agent, other.id, got, err)
				}
			}
			if err := s.Put(ctx, "alice", "resp_1", []byte(`{"a":2}`), time.Hour); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Get(ctx, "alice", "resp_1"); string(got) != `{"a":2}` {
				t.Errorf("after a second put: %q", got)
			}
			if err := s.Put(ctx, "alice", "resp_short", []byte(`x`), 150*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, "alice", "resp_short"); err != nil {
				t.Fatalf("before its TTL: %v", err)
			}
			b.pass(300 * time.Millisecond)
			if _, err := s.Get(ctx, "alice", "resp_short"); !errors.Is(err, proxy.ErrResponseNotFound) {
				t.Errorf("after its TTL: %v", err)
			}
			if _, err := s.Get(ctx, "alice", "resp_1"); err != nil {
				t.Errorf("an hour-long entry is gone: %v", err)
			}
		})
	}
}

// TestMemoryResponseStoreBounds: the memory store holds at most its entries
// and bytes, evicting the oldest first; a conversation larger than the
// whole store is refused rather than evicting everything.
func TestMemoryResponseStoreBounds(t *testing.T) {
	ctx := context.Background()
	s := proxy.NewMemoryResponseStore(proxy.MemoryResponseStoreOptions{MaxEntries: 3, MaxBytes: 10})
	for _, id := range []string{"a", "b", "c", "d"} {
		if err := s.Put(ctx, "x", id, []byte("12"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if s.Len() != 3 {
		t.Errorf("%d entries, want the cap of 3", s.Len())
	}
	if _, err := s.Get(ctx, "x", "a"); !errors.Is(err, proxy.ErrResponseNotFound) {
		t.Errorf("the oldest entry was not evicted: %v", err)
	}
	// 3 × 2 bytes kept; 7 more pass 10 until b and c are gone.
	if err := s.Put(ctx, "x", "e", []byte("1234567"), time.Hour); err != nil {
		t.Fatal(err)
	}
	for id, kept := range map[string]bool{"b": false, "c": false, "d": true, "e": true} {
		if _, err := s.Get(ctx, "x", id); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", id, err == nil, kept)
		}
	}
	if err := s.Put(ctx, "x", "huge", []byte("12345678901"), time.Hour); err == nil {
		t.Error("a conversation over the store's size was kept")
	}
	if _, err := s.Get(ctx, "x", "d"); err != nil {
		t.Errorf("an over-size put evicted others: %v", err)
	}
	// Expired entries are swept at the next put, before anything live.
	c := &clock{now: time.Unix(0, 0)}
	s = proxy.NewMemoryResponseStore(proxy.MemoryResponseStoreOptions{MaxEntries: 2, Now: c.Now})
	_ = s.Put(ctx, "x", "old", []byte("1"), time.Second)
	_ = s.Put(ctx, "x", "live", []byte("1"), time.Hour)
	c.Add(2 * time.Second)
	_ = s.Put(ctx, "x", "new", []byte("1"), time.Hour)
	if _, err := s.Get(ctx, "x", "live"); err != nil || s.Len() != 2 {
		t.Errorf("live entry: %v; %d entries", err, s.Len())
	}
}

// TestRedisResponseStore: the key is the agent's, set with a millisecond
// TTL (SET PX), and every call has a deadline: a Redis that accepts but
// never answers is a state_unavailable error within it, as is one that is
// down.
func TestRedisResponseStore(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	client, err := limit.NewRedisClient(srv.URL(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	s := proxy.NewRedisResponseStore(client, "", time.Second)
	if err := s.Put(ctx, "alice", "resp_0123", []byte("conv"), 90*time.Second+500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if v, err := client.Get(ctx, "gw:resp:alice:resp_0123").Result(); err != nil || v != "conv" {
		t.Fatalf("key gw:resp:alice:resp_0123: %q %v", v, err)
	}
	if ttl, err := client.PTTL(ctx, "gw:resp:alice:resp_0123").Result(); err != nil || ttl <= 90*time.Second || ttl > 90*time.Second+500*time.Millisecond {
		t.Errorf("PTTL %v %v, want 90.5s to the millisecond", ttl, err)
	}
	if err := s.Put(ctx, "alice", "resp_x", []byte("c"), 0); err == nil {
		t.Error("a put without a TTL was accepted")
	}

	// A Redis that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	hung := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ReadTimeout: time.Minute, WriteTimeout: time.Minute, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = hung.Close() })
	hs := proxy.NewRedisResponseStore(hung, "", 100*time.Millisecond)
	start := time.Now()
	_, err = hs.Get(ctx, "alice", "resp_0123")
	if !errors.Is(err, apierror.ErrStateUnavailable) || time.Since(start) > 2*time.Second {
		t.Errorf("get from a hung Redis: %v after %v, want state unavailable within the deadline", err, time.Since(start))
	}
	start = time.Now()
	if err := hs.Put(ctx, "alice", "resp_0123", []byte("c"), time.Hour); !errors.Is(err, apierror.ErrStateUnavailable) || time.Since(start) > 2*time.Second {
		t.Errorf("put to a hung Redis: %v after %v", err, time.Since(start))
	}

	srv.Stop()
	if _, err := s.Get(ctx, "alice", "resp_0123"); !errors.Is(err, apierror.ErrStateUnavailable) || strings.Contains(err.Error(), "conv") {
		t.Errorf("get from a stopped Redis: %v", err)
	}
}
