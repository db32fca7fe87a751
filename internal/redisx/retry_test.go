package redisx

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/testredis"
)

// slowProxy forwards to addr, holding every answer back by delay while
// slow is set: a server that ran the command but answers after the
// client's deadline.
func slowProxy(t *testing.T, addr string, delay time.Duration, slow *atomic.Bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						if slow.Load() {
							time.Sleep(delay)
						}
						if _, werr := c.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// TestTimedOutCommandNotSentAgain: a command whose answer comes after
// state.timeout fails once; the client does not send it again, since it
// may have run: most of the gateway's commands are not idempotent (a
// reservation, a spawn, a queue push would count twice). go-redis retries
// dial errors, pool timeouts and dropped connections on its own (its
// MaxRetries), not a read that timed out; this holds it to that.
func TestTimedOutCommandNotSentAgain(t *testing.T) {
	rd := testredis.Start(t)
	var slow atomic.Bool
	addr := slowProxy(t, rd.Addr(), 300*time.Millisecond, &slow)
	c, err := NewClient(Settings{URL: "redis://" + addr + "/0"}, Timeouts{Call: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	slow.Store(true)
	if err := c.Incr(ctx, "counted").Err(); err == nil {
		t.Fatal("INCR answered after the deadline succeeded")
	}
	slow.Store(false)
	direct := redis.NewClient(&redis.Options{Addr: rd.Addr()})
	defer direct.Close()
	time.Sleep(time.Second) // let any resent command land
	if n, err := direct.Get(ctx, "counted").Int(); err != nil || n != 1 {
		t.Fatalf("the counter is %d (%v): the timed-out INCR ran %d times, want once", n, err, n)
	}
}
