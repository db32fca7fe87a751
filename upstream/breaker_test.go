package upstream

import (
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/testkit"
)

// step is one event of a breaker's life: a request asks for leave (and,
// admitted, reports how it went), or time passes.
type step struct {
	wait   time.Duration
	admit  bool   // want the request admitted
	result Result // reported when admitted
	open   bool   // want the breaker open (or half-open) after the step
}

func TestBreaker(t *testing.T) {
	const cooldown = time.Minute
	cases := []struct {
		name      string
		steps     []step
		wantOpens int64
	}{
		{name: "failures below the threshold keep it closed", steps: []step{
			{admit: true, result: Failed}, {admit: true, result: Failed}, {admit: true, result: Answered},
			{admit: true, result: Failed}, {admit: true, result: Failed},
		}},
		{name: "three failures in a row open it", wantOpens: 1, steps: []step{
			{admit: true, result: Failed}, {admit: true, result: Failed}, {admit: true, result: Failed, open: true},
			{admit: false, open: true},
			{wait: cooldown - time.Second, admit: false, open: true},
		}},
		{name: "an answering probe closes it", wantOpens: 1, steps: []step{
			{admit: true, result: Failed}, {admit: true, result: Failed}, {admit: true, result: Failed, open: true},
			{wait: cooldown, admit: true, result: Answered},
			{admit: true, result: Failed}, // counting from zero again
			{admit: true, result: Failed},
		}},
		{name: "a failing probe opens it for another cooldown", wantOpens: 2, steps: []step{
			{admit: true, result: Failed}, {admit: true, result: Failed}, {admit: true, result: Failed, open: true},
			{wait: cooldown, admit: true, result: Failed, open: true},
			{wait: cooldown - time.Second, admit: false, open: true},
			{wait: time.Second, admit: true, result: Answered},
		}},
		{name: "an abandoned probe lets the next request probe", wantOpens: 1, steps: []step{
			{admit: true, result: Failed}, {admit: true, result: Failed}, {admit: true, result: Failed, open: true},
			{wait: cooldown, admit: true, result: Abandoned, open: true},
			{admit: true, result: Answered},
		}},
		{name: "a 4xx answer between failures resets the count", steps: []step{
			{admit: true, result: Failed}, {admit: true, result: Failed}, {admit: true, result: Answered},
			{admit: true, result: Failed}, {admit: true, result: Failed},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := testkit.NewClock(time.Unix(0, 0))
			s, err := New([]Config{{Name: "a", Type: "mock", Models: []string{"*"},
				Breaker: Breaker{Failures: 3, Cooldown: confkit.Duration(cooldown)}}}, nil, WithClock(clk.Now))
			if err != nil {
				t.Fatal(err)
			}
			u := s.Route("m")
			for i, st := range tc.steps {
				clk.Advance(st.wait)
				p, ok := u.Admit()
				if ok != st.admit {
					t.Fatalf("step %d: admitted %v, want %v", i, ok, st.admit)
				}
				if ok {
					p.Done(st.result)
				}
				if open := s.OpenBreakers() == 1; open != st.open {
					t.Fatalf("step %d: open %v, want %v", i, open, st.open)
				}
			}
			if got := s.Stats().BreakerOpens(); got != tc.wantOpens {
				t.Errorf("openings %d, want %d", got, tc.wantOpens)
			}
		})
	}
}

// While half-open, one probe at a time; a request sent before the breaker
// opened and finishing late changes nothing.
func TestBreakerOneProbeAndLateResults(t *testing.T) {
	clk := testkit.NewClock(time.Unix(0, 0))
	s, _ := New([]Config{{Name: "a", Type: "mock", Models: []string{"*"},
		Breaker: Breaker{Failures: 1, Cooldown: confkit.Duration(time.Minute)}}}, nil, WithClock(clk.Now))
	u := s.Route("m")
	early, _ := u.Admit()
	failing, _ := u.Admit()
	failing.Done(Failed)
	early.Done(Answered) // from before the opening: ignored
	if s.OpenBreakers() != 1 {
		t.Fatal("a late answer from before the opening closed the breaker")
	}
	clk.Advance(time.Minute)
	probe, ok := u.Admit()
	if !ok {
		t.Fatal("no probe after the cooldown")
	}
	if _, ok := u.Admit(); ok {
		t.Fatal("a second request admitted while the probe is in flight")
	}
	if u.Reopens().After(clk.Now()) {
		t.Errorf("half-open breaker reopens at %v, after now", u.Reopens())
	}
	probe.Done(Answered)
	if _, ok := u.Admit(); !ok || s.OpenBreakers() != 0 || !u.Reopens().IsZero() {
		t.Fatal("the probe's answer did not close the breaker")
	}
}

// A forced attempt (every candidate open) that fails while the breaker
// cools down extends the cooldown without counting a new opening; one
// that answers closes it.
func TestBreakerForced(t *testing.T) {
	clk := testkit.NewClock(time.Unix(0, 0))
	s, _ := New([]Config{{Name: "a", Type: "mock", Models: []string{"*"},
		Breaker: Breaker{Failures: 1, Cooldown: confkit.Duration(time.Minute)}}}, nil, WithClock(clk.Now))
	u := s.Route("m")
	p, _ := u.Admit()
	p.Done(Failed)
	first := u.Reopens()
	clk.Advance(10 * time.Second)
	u.Force().Done(Failed)
	if got := u.Reopens(); !got.Equal(first.Add(10 * time.Second)) {
		t.Errorf("reopens at %v, want the cooldown from the forced failure, %v", got, first.Add(10*time.Second))
	}
	if n := s.Stats().BreakerOpens(); n != 1 {
		t.Errorf("openings %d, want 1: it never closed", n)
	}
	u.Force().Done(Answered)
	if s.OpenBreakers() != 0 {
		t.Error("a forced attempt's answer did not close the breaker")
	}
}

// Configs built without Check get the documented defaults: five
// failures, not one.
func TestBreakerDefaults(t *testing.T) {
	s, _ := New([]Config{{Name: "a", Type: "mock", Models: []string{"*"}}}, nil)
	u := s.Route("m")
	for i := 1; i <= 5; i++ {
		p, ok := u.Admit()
		if !ok {
			t.Fatalf("refused after %d failures, want 5 before opening", i-1)
		}
		p.Done(Failed)
	}
	if _, ok := u.Admit(); ok {
		t.Fatal("still closed after 5 failures")
	}
}
