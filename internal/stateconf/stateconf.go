// Package stateconf is gateway.yaml's state section: where what replicas
// share lives (rate limits, budgets, approvals, sessions, run-time agents):
// in the process, or in Redis. It owns the section's defaults and checks,
// below the loader, which only composes it; app builds the backend from it.
package stateconf

import (
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/redisx"
)

// Settings selects where rate limits and approval states live.
type Settings struct {
	// Backend is memory or redis. Default memory.
	Backend string `yaml:"backend"`
	// RedisURL is one Redis node; Redis says the same and more (Sentinel,
	// Cluster, TLS, ACL). Give one of the two with backend redis.
	RedisURL string           `yaml:"redis_url"`
	Redis    *redisx.Settings `yaml:"redis"`
	// OnFailure is closed (503 while Redis is down) or local (fall back to
	// in-memory limits). Default local.
	OnFailure string `yaml:"on_failure"`
	// Timeout is the deadline of every call to the state backend; a slower
	// backend counts as down. Default 50ms.
	Timeout confkit.Duration `yaml:"timeout"`
	// Dir keeps what the memory backend must not lose at a restart (the
	// agents spawned at run time). Default data/state, relative to the
	// config file like every path.
	Dir string `yaml:"dir"`
}

// RedisSettings is where the redis backend connects: the redis block, or
// the one node of redis_url.
func (s Settings) RedisSettings() redisx.Settings {
	if s.Redis != nil {
		return *s.Redis
	}
	return redisx.Settings{URL: s.RedisURL}
}

// Check fills in the defaults and checks the backend, its failure mode and
// where Redis is (redis_url or the redis block, not both).
func (s *Settings) Check(r confkit.Reporter) {
	if s.Dir == "" {
		s.Dir = "data/state"
	}
	r.Resolve(&s.Dir)
	if s.Backend == "" {
		s.Backend = "memory"
	}
	if !confkit.OneOf(s.Backend, "memory", "redis") {
		r.Add(r.Line("backend"), "state.backend %q: want memory or redis%s", s.Backend, confkit.DidYouMean(s.Backend, []string{"memory", "redis"}))
	}
	if s.OnFailure == "" {
		s.OnFailure = "local"
	}
	if !confkit.OneOf(s.OnFailure, "closed", "local") {
		r.Add(r.Line("on_failure"), "state.on_failure %q: want closed or local%s", s.OnFailure, confkit.DidYouMean(s.OnFailure, []string{"closed", "local"}))
	}
	if s.Timeout == 0 {
		s.Timeout = confkit.Duration(50 * time.Millisecond)
	}
	if s.Timeout < 0 {
		r.Add(r.Line("timeout"), "state.timeout: must be positive")
	}
	s.checkRedis(r)
}

// checkRedis checks state.redis_url and state.redis (RedisSettings gives
// the one that is set).
func (s *Settings) checkRedis(r confkit.Reporter) {
	switch {
	case s.Redis != nil && s.RedisURL != "":
		r.Add(r.Line("redis"), "state: give redis_url or the redis block, not both")
		return
	case s.Redis == nil:
		if s.Backend == "redis" && s.RedisURL == "" {
			r.Add(r.Line("redis_url"), "state.redis_url is required with backend redis, or a state.redis block (is REDIS_URL set?)")
		}
		return
	}
	for _, p := range s.Redis.Check() {
		r.Add(r.Line(append([]string{"redis"}, p.Path...)...), "%s", p.Msg)
	}
	if t := s.Redis.TLS; t != nil {
		for _, p := range []*string{&t.CAFile, &t.CertFile, &t.KeyFile} {
			r.Resolve(p)
		}
	}
}
