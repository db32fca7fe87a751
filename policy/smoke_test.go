package policy

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A reload that compiles but does not evaluate used to be swapped in: every
// chat was then 403 while /readyz said ready. Each of these is now refused
// at load: the last good policy keeps deciding, the reload counts as a
// failure, and ReloadProblem says why.
func TestReloadThatDoesNotEvaluateKeepsTheLastGoodPolicy(t *testing.T) {
	broken := map[string]string{
		"undefined (package renamed)": "package gateway.chatx\n\ndeny contains \"x\" if input.deny\n",
		"runtime error (conflict)":    "package gateway.chat\n\nx := 1\nx := 2 if true\n\ndeny contains \"y\" if x == 1\n",
		"runtime error (function)":    "package gateway.chat\n\nf(_) := 1\nf(_) := 2\n\ndeny contains \"z\" if f(1) == 1\n",
	}
	for note, body := range broken {
		t.Run(note, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "chat.rego", chatPolicy("v1"))
			var rl reloads
			e := newEngine(t, Options{Dir: dir, Debounce: 20 * time.Millisecond, OnReload: rl.add})
			replace(t, dir, "chat.rego", body)
			eventually(t, "the reload attempt", func() bool { return len(rl.all()) > 0 })
			ev := rl.all()[0]
			if ev.OK || !strings.Contains(ev.Error, "data.gateway.chat.deny") {
				t.Fatalf("reload event %+v", ev)
			}
			d, err := e.ChatDeny(context.Background(), map[string]any{"deny": true})
			if err != nil || d.FailClosed || len(d.Reasons) != 1 || d.Reasons[0] != "v1" {
				t.Fatalf("after the broken reload: %+v %v", d, err)
			}
			if e.Ready() != nil || !strings.Contains(e.ReloadProblem(), "do not evaluate") || e.Stats().ReloadFailures != 1 {
				t.Fatalf("ready %v, problem %q, stats %+v", e.Ready(), e.ReloadProblem(), e.Stats())
			}
		})
	}
}

// The shipped policies answer every decision point on the sample inputs.
func TestShippedPoliciesPassTheSmokeTest(t *testing.T) {
	e := newEngine(t, Options{Dir: "../rego", NoWatch: true})
	p := e.live.Load()
	for pt := range numPoints {
		if !p.defined[pt] {
			t.Errorf("%s is undefined on its sample input", queries[pt])
		}
	}
}
