package messaging

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/globalctx"
	"github.com/sacpgw/gateway/internal/testredis"
)

// TestSeed003ContextLocking: seed 003 §3.2 rule 3 at the store. Updates of
// one thread are atomic in memory and in Redis (shared by replicas):
// concurrent writers each append their history entry, none is lost; an
// update whose fn fails changes nothing; a thread without a context reads
// as none; the Redis copy expires with the thread's retention.
func TestSeed003ContextLocking(t *testing.T) {
	srv := testredis.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	stores := map[string]ContextStore{"memory": NewMemoryContexts(), "redis": NewRedisContexts(client, "", time.Hour)}
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if tc, err := st.Get(ctx, "correlation:none"); tc != nil || err != nil {
				t.Fatalf("Get of a thread without a context: %v %v", tc, err)
			}
			const writers = 16
			var wg sync.WaitGroup
			for i := range writers {
				wg.Go(func() {
					_, err := st.Update(ctx, "correlation:corr-uuid-5678", func(tc *ThreadContext) error {
						tc.History = append(tc.History, globalctx.HistoryEntry{Agent: "vendor_agent", Action: string(rune('a' + i))})
						return nil
					})
					if err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			refused := errors.New("locked")
			if _, err := st.Update(ctx, "correlation:corr-uuid-5678", func(tc *ThreadContext) error {
				tc.CurrentAgent = "intruder"
				return refused
			}); !errors.Is(err, refused) {
				t.Errorf("a failing update: %v", err)
			}
			tc, err := st.Get(ctx, "correlation:corr-uuid-5678")
			if err != nil || tc == nil || len(tc.History) != writers || tc.CurrentAgent != "" {
				t.Fatalf("after %d concurrent updates and a refused one: %+v %v", writers, tc, err)
			}
		})
	}
	if ttl := client.TTL(context.Background(), "{gw:mbox}:rc:correlation:corr-uuid-5678").Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("redis context TTL %s, want the retention (1h)", ttl)
	}
}
