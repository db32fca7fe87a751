package app

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/testredis"
)

// redisYAML is the lines under state: that point a test gateway at
// target: a redis:// URL (state.redis_url), or a state.redis block
// already written as YAML (clusterYAML, sentinelYAML).
func redisYAML(target string) string {
	if strings.HasPrefix(target, "redis://") || strings.HasPrefix(target, "rediss://") {
		return "  redis_url: " + target + "\n"
	}
	return target
}

// clusterYAML is state.redis for c: its nodes as seeds.
func clusterYAML(c *testredis.Cluster) string {
	return "  redis:\n    cluster:\n      addrs: [\"" + strings.Join(c.Addrs(), `", "`) + "\"]\n"
}

// sentinelYAML is state.redis for s: the primary by its name, through the
// Sentinels.
func sentinelYAML(s *testredis.SentinelSet) string {
	return "  redis:\n    sentinel:\n      master: " + testredis.MasterName + "\n      addrs: [\"" +
		strings.Join(s.SentinelAddrs(), `", "`) + "\"]\n"
}

// forEachRedis runs f on one redis-server and on a 3-master Cluster: what
// works on one node must work on a Cluster.
func forEachRedis(t *testing.T, f func(t *testing.T, target string)) {
	t.Run("single", func(t *testing.T) { f(t, testredis.Start(t).URL()) })
	t.Run("cluster", func(t *testing.T) { f(t, clusterYAML(testredis.StartCluster(t))) })
}

// checkSlots makes every Redis step of a fail t when its keys span hash
// slots (testredis.SlotCheck), on any Redis: what a Cluster would refuse
// is found on one node too.
func checkSlots(t testing.TB, a *App) {
	if a.state == nil || a.state.redis == nil {
		return
	}
	a.state.redis.AddHook(testredis.SlotCheck(t))
	if cc, ok := a.state.redis.(*redis.ClusterClient); ok {
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(testredis.SlotCheck(t)) })
	}
}
