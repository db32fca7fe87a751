package testredis

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name the Sentinels of StartSentinel monitor the
// primary by.
const MasterName = "gw"

// Sentinel timings: short, so that a failover test takes seconds.
const (
	// DownAfter is down-after-milliseconds: how long the primary must not
	// answer before a Sentinel deems it down.
	DownAfter = 500 * time.Millisecond
	// FailoverTimeout is failover-timeout.
	FailoverTimeout = 2 * time.Second
)

// SentinelSet is a primary and one replica watched by three Sentinels
// (quorum 2), all redis-server processes on loopback ports.
type SentinelSet struct {
	// Data are the primary (first, at the start) and the replica.
	Data      []*Server
	Sentinels []*Server
}

// StartSentinel runs a primary, a replica and three Sentinels for tb, and
// waits until every Sentinel knows the replica and the other Sentinels.
func StartSentinel(tb testing.TB) *SentinelSet {
	tb.Helper()
	primary := startServer(tb, tb.TempDir(), nil)
	replica := startServer(tb, tb.TempDir(), func(int) []string {
		return []string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.port)}
	})
	set := &SentinelSet{Data: []*Server{primary, replica}}
	for range 3 {
		dir := tb.TempDir()
		set.Sentinels = append(set.Sentinels, startServer(tb, dir, func(port int) []string {
			conf := filepath.Join(dir, "sentinel.conf")
			text := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n"+
				"sentinel down-after-milliseconds %s %d\n"+
				"sentinel failover-timeout %s %d\n"+
				"sentinel parallel-syncs %s 1\n",
				MasterName, primary.port, MasterName, DownAfter.Milliseconds(), MasterName, FailoverTimeout.Milliseconds(), MasterName)
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				tb.Fatalf("testredis: %v", err)
			}
			return []string{conf, "--sentinel"}
		}))
	}
	set.waitSettled(tb)
	return set
}

// SentinelAddrs are the Sentinels' host:port.
func (s *SentinelSet) SentinelAddrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		out[i] = n.Addr()
	}
	return out
}

// waitSettled waits until each Sentinel sees the replica and two other
// Sentinels, which a failover needs.
func (s *SentinelSet) waitSettled(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr()})
		for {
			reps, err1 := sc.Replicas(context.Background(), MasterName).Result()
			sens, err2 := sc.Sentinels(context.Background(), MasterName).Result()
			if err1 == nil && err2 == nil && len(reps) >= 1 && len(sens) >= len(s.Sentinels)-1 {
				break
			}
			if time.Now().After(deadline) {
				_ = sc.Close()
				tb.Fatalf("testredis: sentinel %s not settled within 30s: replicas %v (%v), sentinels %d (%v)", n.Addr(), reps, err1, len(sens), err2)
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = sc.Close()
	}
}

// Primary is the data node the Sentinels name as the primary now.
func (s *SentinelSet) Primary(tb testing.TB) *Server {
	tb.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinels[0].Addr()})
	defer sc.Close()
	addr, err := sc.GetMasterAddrByName(context.Background(), MasterName).Result()
	if err != nil || len(addr) != 2 {
		tb.Fatalf("testredis: SENTINEL GET-MASTER-ADDR-BY-NAME: %v %v", addr, err)
	}
	for _, d := range s.Data {
		if strconv.Itoa(d.port) == addr[1] {
			return d
		}
	}
	tb.Fatalf("testredis: the sentinels name %v, not one of ours", addr)
	return nil
}

// WaitReplicated waits until every replica of the current primary has
// acknowledged all of its writes (WAIT), so that a failover loses nothing
// written before.
func (s *SentinelSet) WaitReplicated(tb testing.TB) {
	tb.Helper()
	p := s.Primary(tb)
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer c.Close()
	n, err := c.Wait(context.Background(), len(s.Data)-1, 5*time.Second).Result()
	if err != nil || n < int64(len(s.Data)-1) {
		tb.Fatalf("testredis: WAIT: %d replicas acknowledged, %v", n, err)
	}
}
