package app

import (
	"reflect"
	"slices"

	"github.com/sacpgw/gateway/internal/config"
)

// restartOnly are the settings read once, when the gateway starts: a
// reload that changes one of them takes the rest of the new configuration
// and reports this one as waiting for a restart (log, audit entry,
// gateway_config_restart_pending, /readyz detail), rather than logging
// "config reloaded" and silently running the old value. Everything else
// in the config directory is applied by a reload: agents and their
// tokens, limits and budgets, upstreams, pricing, the protocol, redaction,
// the approval service's settings, the registry, workflows, messaging's
// timeouts and retries. The policy files themselves reload on their own.
var restartOnly = []struct {
	key string
	of  func(*config.Config) any
}{
	{"health_listen", func(c *config.Config) any { return c.Gateway.HealthListen }},
	{"shutdown_timeout", func(c *config.Config) any { return c.Gateway.ShutdownTimeout }},
	{"log", func(c *config.Config) any { return c.Gateway.Log }},
	{"tls", func(c *config.Config) any { return c.Gateway.TLS }},
	{"http", func(c *config.Config) any { return c.Gateway.HTTP }},
	{"tracing", func(c *config.Config) any { return c.Gateway.Tracing }},
	{"audit", func(c *config.Config) any { return c.Gateway.Audit }},
	{"state", func(c *config.Config) any { return c.Gateway.State }},
	{"policy.dir", func(c *config.Config) any { return c.Gateway.Policy.Dir }},
	{"policy.shadow_dir", func(c *config.Config) any { return c.Gateway.Policy.ShadowDir }},
	{"policy.bundle", func(c *config.Config) any { return c.Gateway.Policy.Bundle }},
	{"messaging.workers", func(c *config.Config) any { return c.Gateway.Messaging.Workers }},
	{"messaging.queue_capacity", func(c *config.Config) any { return c.Gateway.Messaging.QueueCapacity }},
	{"messaging.history_retention", func(c *config.Config) any { return c.Gateway.Messaging.HistoryRetention }},
	{"messaging.tls", func(c *config.Config) any { return c.Gateway.Messaging.TLS }},
	{"messaging.allowed_networks", func(c *config.Config) any { return c.Gateway.Messaging.AllowedNetworks }},
}

// restartPending lists the restart-only settings (as dotted gateway.yaml
// keys, as deep as the change) whose value in loaded differs from the one
// the gateway started with; listen is compared with fileListen, the
// address gateway.yaml gave at startup (a --listen flag overrides it for
// this run, which no file change undoes).
func restartPending(running, loaded *config.Config, fileListen string) []string {
	var out []string
	if loaded.Gateway.Listen != fileListen {
		out = append(out, "listen")
	}
	for _, r := range restartOnly {
		out = append(out, diffPaths(r.key, reflect.ValueOf(r.of(running)), reflect.ValueOf(r.of(loaded)))...)
	}
	slices.Sort(out)
	return out
}

// diffPaths names the leaves where a and b (values of one type) differ: a
// struct is compared field by field under its yaml names; anything else
// (a list, a map, a scalar) as a whole.
func diffPaths(path string, a, b reflect.Value) []string {
	if a.Kind() == reflect.Pointer {
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return []string{path}
			}
			return nil
		}
		a, b = a.Elem(), b.Elem()
	}
	if a.Kind() != reflect.Struct {
		if reflect.DeepEqual(a.Interface(), b.Interface()) {
			return nil
		}
		return []string{path}
	}
	var out []string
	for i := range a.NumField() {
		if config.Inlined(a.Type().Field(i)) {
			out = append(out, diffPaths(path, a.Field(i), b.Field(i))...)
			continue
		}
		name, ok := config.YAMLName(a.Type().Field(i))
		if !ok {
			continue // derived from other fields, which are compared
		}
		out = append(out, diffPaths(path+"."+name, a.Field(i), b.Field(i))...)
	}
	return out
}
