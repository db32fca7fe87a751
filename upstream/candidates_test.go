package upstream

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// noRand fails the test if a random number is drawn.
type noRand struct{ t *testing.T }

func (n noRand) Uint64() uint64 {
	n.t.Fatal("a random number was drawn")
	return 0
}

func names(us []*Upstream) string {
	var out []string
	for _, u := range us {
		out = append(out, u.Name)
	}
	return strings.Join(out, ",")
}

func mockUp(name string, priority, weight int, models ...string) Config {
	return Config{Name: name, Type: "mock", Models: models, Priority: priority, Weight: weight}
}

// Priority orders the groups; a lone match draws no random number.
func TestCandidatesOrder(t *testing.T) {
	cfgs := []Config{
		mockUp("backup", 2, 1, "gpt-*"),
		mockUp("local", 0, 1, "llama-*"),
		mockUp("primary", 1, 1, "gpt-*"),
		mockUp("other", 0, 1, "claude-*"),
	}
	s, err := New(cfgs, nil, WithRand(noRand{t}))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"gpt-4o":    "primary,backup",
		"llama-3":   "local",
		"claude-3":  "other",
		"unrouted":  "",
		"gpt-4o-mi": "primary,backup",
	}
	for model, want := range cases {
		if got := names(s.Candidates(model)); got != want {
			t.Errorf("Candidates(%q) = %s, want %s", model, got, want)
		}
	}
	if u := s.Route("gpt-4o"); u == nil || u.Name != "primary" {
		t.Errorf("Route(gpt-4o) = %v, want the lowest priority", u)
	}
}

// Within a priority, each upstream comes first in proportion to its
// weight; the others follow, so each order holds every candidate.
func TestCandidatesSpread(t *testing.T) {
	cases := []struct {
		name string
		cfgs []Config
		want map[string]float64 // share of first places
		last string             // the last candidate, always
	}{
		{name: "equal weights spread evenly", cfgs: []Config{mockUp("a", 0, 1, "*"), mockUp("b", 0, 1, "*"), mockUp("z", 1, 1, "*")},
			want: map[string]float64{"a": .5, "b": .5}, last: "z"},
		{name: "3:1", cfgs: []Config{mockUp("a", 0, 3, "*"), mockUp("b", 0, 1, "*"), mockUp("z", 1, 9, "*")},
			want: map[string]float64{"a": .75, "b": .25}, last: "z"},
		{name: "1:2:1", cfgs: []Config{mockUp("a", 0, 1, "*"), mockUp("b", 0, 2, "*"), mockUp("c", 0, 1, "*")},
			want: map[string]float64{"a": .25, "b": .5, "c": .25}},
		{name: "weight 0 counts as the default 1", cfgs: []Config{mockUp("a", 0, 0, "*"), mockUp("b", 0, 1, "*")},
			want: map[string]float64{"a": .5, "b": .5}},
	}
	const n = 4000
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfgs, nil, WithRand(rand.NewPCG(1, 2)))
			if err != nil {
				t.Fatal(err)
			}
			first := map[string]int{}
			for range n {
				c := s.Candidates("m")
				if len(c) != len(tc.cfgs) {
					t.Fatalf("order %s lacks candidates", names(c))
				}
				got := strings.Split(names(c), ",")
				sorted := slices.Clone(got)
				slices.Sort(sorted)
				if len(slices.Compact(sorted)) != len(got) {
					t.Fatalf("order %v repeats a candidate", got)
				}
				if tc.last != "" && got[len(got)-1] != tc.last {
					t.Fatalf("order %v: the higher priority is not last", got)
				}
				first[got[0]]++
			}
			for name, share := range tc.want {
				if got := float64(first[name]) / n; got < share-0.04 || got > share+0.04 {
					t.Errorf("%s first in %.3f of orders, want %.2f", name, got, share)
				}
			}
		})
	}
}

// One Stats given to successive Sets (config reloads) keeps counting.
func TestStatsOutliveSets(t *testing.T) {
	st := NewStats()
	for range 2 {
		s, err := New([]Config{mockUp("a", 0, 1, "*")}, nil, WithStats(st))
		if err != nil {
			t.Fatal(err)
		}
		s.Route("m").FailedOver()
		if s.Stats() != st {
			t.Fatal("the Set counts into another Stats")
		}
	}
	if got := st.ByUpstream()["a"].Failovers; got != 2 || st.Failovers() != 2 {
		t.Errorf("failovers %d (total %d) across two Sets, want 2", got, st.Failovers())
	}
}
