package config

import (
	"errors"
	"path"
	"strings"
	"testing"
)

// okGateway2 serves two models by name and nothing else.
const okGateway2 = "upstreams:\n  - name: o\n    type: openai\n    base_url: https://api.openai.com/v1\n    models: [gpt-4o, gpt-4o-mini]\n"

func TestGlobOverlap(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"gpt-4o", "gpt-4o", true},
		{"gpt-4o", "gpt-4o-mini", false},
		{"gpt-4o*", "gpt-4o", true}, // the star matches nothing
		{"gpt-4o*", "*", true},
		{"gpt-4o*", "gpt-4o-mini", true},
		{"gpt-*", "*-mini", true},    // "gpt-mini"
		{"gpt-*", "claude-*", false}, // the prefixes differ
		{"*-mini", "*-nano", false},  // the suffixes differ
		{"*a*", "*b*", true},         // "ab"
		{"a*b", "*c", false},
		{"a?c", "abc", true},
		{"a?c", "ab", false},                       // lengths
		{"???", "??", false},                       // lengths
		{"*", "org/model", false},                  // path.Match's * never matches '/'
		{"org/*", "org/m?", true},                  // literal '/' on both sides
		{"?", "/", false},                          // nor does ?
		{"gpt-[45]o", "gpt-4o", true},              // class against a literal: decided
		{"gpt-[56]o", "gpt-4o", false},             // by path.Match
		{"gpt-[^4]o", "gpt-4o", false},             // negated
		{"gpt-[a-z]", "gpt-[0-9]", true},           // two classes: assumed (conservative)
		{`gpt\*`, "gpt*", true},                    // an escaped star is a literal, matched by the star
		{`gpt\*`, "gpt-4", false},                  //
		{"mock-*", "mock-1", true},                 // the shipped config
		{"**", "", true},                           // both empty
		{"", "a", false},                           //
		{"a*b*c", "abc", true},                     //
		{"a*b*c", "acb", false},                    //
		{"claude-3-*-latest", "claude-3-*", true},  //
		{"*-latest", "claude-3-5-sonnet-*", true},  // claude-3-5-sonnet--latest
		{"*-latest", "claude-3-5-sonnet-2", false}, //
	}
	for _, c := range cases {
		if got := globOverlap(c.a, c.b); got != c.want {
			t.Errorf("globOverlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := globOverlap(c.b, c.a); got != c.want {
			t.Errorf("globOverlap(%q, %q) = %v, want %v (symmetric)", c.b, c.a, got, c.want)
		}
		// Where one side is literal, path.Match is the oracle.
		for _, lit := range [][2]string{{c.a, c.b}, {c.b, c.a}} {
			if !isGlob(lit[0]) {
				if m, _ := path.Match(lit[1], lit[0]); m != c.want {
					t.Errorf("case %q %q disagrees with path.Match", c.a, c.b)
				}
			}
		}
	}
}

// TestUnroutedModels: an allow-list entry no upstream can serve is a load
// error at its line; an entry some model could satisfy loads.
func TestUnroutedModels(t *testing.T) {
	mixed := okGateway2 + "  - name: m\n    type: mock\n    models: [\"mock-*\"]\n"
	cases := []struct {
		note   string
		gw     string
		models string
		want   string // "": loads
	}{
		{"literal served", okGateway2, `[gpt-4o]`, ""},
		{"glob served by a literal", okGateway2, `["gpt-4o*"]`, ""},
		{"glob served by a glob", mixed, `["mock-1*"]`, ""},
		{"literal served by a glob", mixed, `[mock-7]`, ""},
		{"anything served by a star", okGateway, `[o1-preview, "claude-*"]`, ""},
		{"literal unserved", okGateway2, `[gpt-4o, o1]`,
			`agents.yaml:4: agent "a1": models: "o1" is served by no upstream in gateway.yaml (their models: gpt-4o, gpt-4o-mini)`},
		{"glob unserved", mixed, `["claude-*"]`,
			`agents.yaml:4: agent "a1": models: no model matching "claude-*" is served by any upstream in gateway.yaml (their models: gpt-4o, gpt-4o-mini, mock-*)`},
		{"a model with a slash and a star upstream", okGateway, `[org/model]`,
			`agents.yaml:4: agent "a1": models: "org/model" is served by no upstream`},
		{"bad upstream glob: no guess", "upstreams:\n  - name: m\n    type: mock\n    models: [\"[\"]\n", `[x]`,
			`bad glob "["`},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			_, err := loadFiles(t, tc.gw, okAgents+"    models: "+tc.models+"\n", okProtocol, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want it loaded: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("problems:\n%v\nwant one containing %q", err, tc.want)
			}
			var ps Problems
			if errors.As(err, &ps) && strings.HasPrefix(tc.note, "bad upstream glob") {
				for _, p := range ps {
					if strings.Contains(p.Msg, "served by") {
						t.Errorf("with a bad upstream glob the allow-list is not judged: %v", p)
					}
				}
			}
		})
	}
}
