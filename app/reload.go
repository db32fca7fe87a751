package app

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
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

// Reload loads the config directory again and, if it is valid, swaps in a
// new OpenAI front door built from it (agents, tokens, limits, models,
// upstreams, protocol and redaction settings). A bad config keeps the last
// good one and says why. Either way the attempt is audited. What is bound
// at startup (listen address, TLS, audit, state backend, policy dir, the
// approval service) needs a restart.
func (a *App) Reload(dir string, current *config.Config) *config.Config {
	cfg, err := config.Load(dir)
	summary := audit.Members("event", "reload", "files", configDigest(dir))
	var pending []string
	if err == nil {
		pending = restartPending(a.running, cfg, a.fileListen)
		cfg.Gateway.Listen = current.Gateway.Listen
		err = a.reconfigure(cfg)
	}
	if err != nil {
		a.reloadsFailed.Add(1)
	} else {
		a.reloadsOK.Add(1)
		a.pending.Store(&pending)
		summary.Any("restart_pending", pending)
		if len(pending) > 0 {
			a.log.Warn("config reloaded, but these settings take effect only after a restart; the running values stay", "dir", dir, "restart_pending", strings.Join(pending, ", "))
		}
	}
	summary.Bool("ok", err == nil)
	if err != nil {
		summary.Str("error", err.Error())
		a.log.Error("config reload failed; the last good configuration keeps serving", "dir", dir, "error", err.Error())
	} else {
		a.log.Info("config reloaded", "dir", dir, "agents", len(cfg.Agents))
	}
	if _, aerr := a.audit.Append(context.Background(), audit.Record{Kind: audit.KindConfigReload, Object: summary}); aerr != nil {
		a.log.Error("audit entry not written", "kind", audit.KindConfigReload, "error", aerr.Error())
	}
	if err != nil {
		return current
	}
	return cfg
}

// Reconfigurer is a component that takes a new configuration without a
// restart, all or nothing: Prepare builds and checks everything cfg needs
// and returns apply, which swaps it in and cannot fail. Requests in flight
// finish under the configuration they began with. Every door is one
// (door.Door), and so is the door frame.
type Reconfigurer interface {
	Prepare(cfg *config.Config) (apply func(), err error)
}

var _ Reconfigurer = (*door.Frame)(nil)

// reconfigure prepares the frame and every door for cfg, in the order of
// doorList (the OpenAI door last: it holds the new upstream pools), and
// applies them all only when every one is ready: a config that fails
// anywhere keeps the last good one everywhere.
func (a *App) reconfigure(cfg *config.Config) error {
	rs := []Reconfigurer{a.frame}
	for _, d := range a.doors {
		rs = append(rs, d)
	}
	applies := make([]func(), 0, len(rs))
	for _, r := range rs {
		apply, err := r.Prepare(cfg)
		if err != nil {
			return err
		}
		applies = append(applies, apply)
	}
	for _, apply := range applies {
		apply()
	}
	a.embedModel.Store(embeddingsModel(cfg))
	a.embedSelf.Store(embeddingsSelf(cfg))
	return nil
}

// watchConfig reloads on changes to the config directory, debounced so an
// editor's write-rename (or a ConfigMap's symlink swap) is one reload.
func (a *App) watchConfig(ctx context.Context, dir string, cfg *config.Config) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("config watch: %w", err)
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return fmt.Errorf("config watch %s: %w", dir, err)
	}
	go func() {
		defer w.Close()
		var timer <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) != 0 {
					timer = time.After(300 * time.Millisecond)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				a.log.Warn("config watch", "error", err.Error())
			case <-timer:
				timer = nil
				cfg = a.Reload(dir, cfg)
			}
		}
	}()
	return nil
}
