package testredis

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// CLIHint is the reason given when redis-cli is missing.
const CLIHint = "redis-cli not installed: apt-get install -y redis-tools"

// clusterNodeTimeout is the cluster's cluster-node-timeout: short, so that
// a test sees a node failure within seconds.
const clusterNodeTimeout = 1000 * time.Millisecond

// Cluster is a Redis Cluster of three masters (no replicas) on loopback
// ports, created with redis-cli --cluster create. Its nodes keep an
// append-only file (fsync always), so a restarted node comes back with
// what it acknowledged.
type Cluster struct {
	Nodes []*Server
}

// StartCluster runs a 3-master Cluster for tb and waits until it serves
// every slot.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	cli := lookPath(tb, "redis-cli", CLIHint)
	c := &Cluster{}
	for i := range 3 {
		dir := filepath.Join(tb.TempDir(), "node"+strconv.Itoa(i))
		c.Nodes = append(c.Nodes, startServer(tb, mkdir(tb, dir), func(int) []string {
			return []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout.Milliseconds())),
				"--appendonly", "yes", "--appendfsync", "always"}
		}))
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("testredis: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.WaitOK(tb)
	return c
}

// Addrs are the nodes' host:port, the seeds a client is given.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// WaitOK waits until every running node reports cluster_state:ok.
func (c *Cluster) WaitOK(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
		for {
			info, err := cl.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = cl.Close()
				tb.Fatalf("testredis: cluster node %s not ok within 20s: %v %s", n.Addr(), err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = cl.Close()
	}
}

// Client is a cluster client on c, closed when tb ends, that fails tb on a
// cross-slot step (SlotCheck), also within transactions (which run on a
// node's own client).
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	cl.AddHook(SlotCheck(tb))
	cl.OnNewNode(func(n *redis.Client) { n.AddHook(SlotCheck(tb)) })
	tb.Cleanup(func() { _ = cl.Close() })
	return cl
}

// NodeOf is the node serving key's slot.
func (c *Cluster) NodeOf(tb testing.TB, key string) *Server {
	tb.Helper()
	slot := Slot(key)
	cl := redis.NewClient(&redis.Options{Addr: c.Nodes[0].Addr()})
	defer cl.Close()
	shards, err := cl.ClusterShards(context.Background()).Result()
	if err != nil {
		tb.Fatalf("testredis: CLUSTER SHARDS: %v", err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if int64(slot) < r.Start || int64(slot) > r.End {
				continue
			}
			for _, sn := range sh.Nodes {
				for _, n := range c.Nodes {
					if sn.Role == "master" && int64(n.port) == sn.Port {
						return n
					}
				}
			}
		}
	}
	tb.Fatalf("testredis: no node serves slot %d", slot)
	return nil
}

func mkdir(tb testing.TB, dir string) string {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatalf("testredis: %v", err)
	}
	return dir
}
