package policy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func write(t testing.TB, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replace writes like an editor that saves atomically: a temporary file
// renamed over the original.
func replace(t testing.TB, dir, name, body string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".swp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func chatPolicy(reason string) string {
	return "package gateway.chat\n\ndeny contains \"" + reason + "\" if input.deny\n"
}

// reloads collects OnReload events.
type reloads struct {
	mu sync.Mutex
	ev []ReloadEvent
}

func (r *reloads) add(ev ReloadEvent) {
	r.mu.Lock()
	r.ev = append(r.ev, ev)
	r.mu.Unlock()
}

func (r *reloads) all() []ReloadEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ev)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHotReload edits the policy directory while decisions run
// concurrently: good changes are picked up, a broken one keeps the last
// good policies, reports the compiler error with file and line, and no
// decision ever fails closed.
func TestHotReload(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "chat.rego", chatPolicy("v1"))
	var rl reloads
	e := newEngine(t, Options{Dir: dir, Debounce: 20 * time.Millisecond, OnReload: rl.add})
	ctx := context.Background()
	in := map[string]any{"deny": true}

	reason := func() string {
		d, err := e.ChatDeny(ctx, in)
		if err != nil || d.FailClosed || len(d.Reasons) != 1 {
			t.Errorf("decision %+v %v", d, err)
			return ""
		}
		return d.Reasons[0]
	}
	if got := reason(); got != "v1" {
		t.Fatalf("initial reason %q", got)
	}

	// Concurrent evaluations for the whole test, under -race.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var evals, bad atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := e.ChatDeny(ctx, in)
				evals.Add(1)
				if err != nil || d.FailClosed || !d.Deny {
					bad.Add(1)
				}
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
		if bad.Load() > 0 {
			t.Errorf("%d of %d concurrent decisions failed", bad.Load(), evals.Load())
		}
		if evals.Load() == 0 {
			t.Error("no concurrent decisions ran")
		}
	}()

	// 1. A good change in place.
	rev1 := e.Revision()
	write(t, dir, "chat.rego", chatPolicy("v2"))
	eventually(t, "v2", func() bool { return reason() == "v2" })
	if e.Revision() == rev1 {
		t.Error("revision unchanged")
	}
	eventually(t, "reload event", func() bool { return len(rl.all()) >= 1 })
	if ev := rl.all()[len(rl.all())-1]; !ev.OK || ev.Revision != e.Revision() || !slices.Equal(ev.Files, []string{"chat.rego"}) || ev.Error != "" {
		t.Errorf("reload event %+v", ev)
	}

	// 2. A broken file: the last good policies keep serving.
	good := e.Revision()
	write(t, dir, "broken.rego", "package gateway.chat\n\ndeny contains \"x\" if {\n\tinput.a ==\n}\n")
	eventually(t, "failed reload event", func() bool {
		evs := rl.all()
		return !evs[len(evs)-1].OK
	})
	ev := rl.all()[len(rl.all())-1]
	if !strings.Contains(ev.Error, filepath.Join(dir, "broken.rego")+":5:") || ev.Revision != good || ev.Attempted == good ||
		!slices.Equal(ev.Files, []string{"broken.rego", "chat.rego"}) {
		t.Errorf("failed reload event %+v", ev)
	}
	if got := reason(); got != "v2" || e.Revision() != good {
		t.Errorf("after a broken change: reason %q revision changed %v", got, e.Revision() != good)
	}
	// os.WriteFile is a create and a write: on a loaded machine the
	// debounce may see them apart, and the empty file fails too.
	if s := e.Stats(); s.ReloadFailures < 1 || s.LastReloadOK || !strings.Contains(s.LastReloadError, "broken.rego:5") {
		t.Errorf("stats %+v", s)
	}

	// 3. Fixing it recovers.
	if err := os.Remove(filepath.Join(dir, "broken.rego")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "recovery", func() bool { return e.Stats().LastReloadOK })
	if e.Revision() != good {
		t.Error("revision differs from the last good one although the files are the same")
	}

	// 4. An editor's atomic save (temporary file renamed over the original).
	replace(t, dir, "chat.rego", chatPolicy("v3"))
	eventually(t, "v3", func() bool { return reason() == "v3" })

	// 5. A new subdirectory with a new file.
	if err := os.MkdirAll(filepath.Join(dir, "rules", "extra"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "rules/extra/extra.rego", "package gateway.chat\n\ndeny contains \"extra\" if input.deny\n")
	eventually(t, "file in a new subdirectory", func() bool {
		d, _ := e.ChatDeny(ctx, in)
		return slices.Equal(d.Reasons, []string{"extra", "v3"})
	})

	// 6. A change in an existing subdirectory.
	write(t, dir, "rules/extra/extra.rego", "package gateway.chat\n\ndeny contains \"extra2\" if input.deny\n")
	eventually(t, "change in a subdirectory", func() bool {
		d, _ := e.ChatDeny(ctx, in)
		return slices.Equal(d.Reasons, []string{"extra2", "v3"})
	})

	if s := e.Stats(); s.Reloads < 4 || s.ReloadFailures < 1 || s.ReloadFailures > 2 {
		t.Errorf("stats %+v", s)
	}
}

// Several writes in a burst are one reload.
func TestReloadDebounce(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "chat.rego", chatPolicy("v0"))
	var rl reloads
	e := newEngine(t, Options{Dir: dir, Debounce: time.Second, OnReload: rl.add})
	for i := range 5 {
		write(t, dir, "chat.rego", chatPolicy("burst"+string(rune('a'+i))))
		time.Sleep(20 * time.Millisecond)
	}
	eventually(t, "reload", func() bool { return len(rl.all()) > 0 })
	time.Sleep(1500 * time.Millisecond)
	if n := len(rl.all()); n != 1 {
		t.Errorf("%d reloads for one burst, want 1", n)
	}
	d, _ := e.ChatDeny(context.Background(), map[string]any{"deny": true})
	if !slices.Equal(d.Reasons, []string{"burste"}) {
		t.Errorf("reasons %q", d.Reasons)
	}
}

// Reload without a change reports nothing.
func TestReloadUnchanged(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "chat.rego", chatPolicy("v0"))
	var rl reloads
	e := newEngine(t, Options{Dir: dir, NoWatch: true, OnReload: rl.add})
	if err := e.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := len(rl.all()); n != 0 {
		t.Fatalf("%d events for an unchanged directory", n)
	}
	write(t, dir, "chat.rego", "package gateway.chat\n\ndeny contains x if {\n\tx := y\n}\n")
	err := e.Reload()
	if err == nil || !strings.Contains(err.Error(), "chat.rego:4") {
		t.Fatalf("reload error %v", err)
	}
	if evs := rl.all(); len(evs) != 1 || evs[0].OK {
		t.Fatalf("events %+v", evs)
	}
}
