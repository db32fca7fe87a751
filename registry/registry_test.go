package registry

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testredis"
)

func testConfig() *config.Config {
	return &config.Config{
		Registry: config.Registry{
			Verbs: []config.Verb{{Name: "predict", Outputs: "predictions"}, {Name: "search", Aliases: []string{"s"}, Outputs: "list"}, {Name: "rank", Outputs: "list"}},
			Tools: []config.Tool{{ID: "PRC_EST", SupportedVerbs: []string{"predict"}}, {ID: "H_API", SupportedVerbs: []string{"search"}}, {ID: "RANK", SupportedVerbs: []string{"rank"}}},
		},
		Agents: map[string]*roster.Agent{
			"price_predictor": {Profile: roster.Profile{SupportedVerbs: []string{"predict"}, SupportedTools: []string{"PRC_EST"}, Inputs: []string{"ctx.history", "method", "window"}, Outputs: []string{"predictions"}}, Endpoint: "http://pp"},
			"trend":           {Profile: roster.Profile{SupportedVerbs: []string{"predict"}, Inputs: []string{"history"}, Outputs: []string{"trends"}}},
			"hotel_search":    {Profile: roster.Profile{SupportedVerbs: []string{"search", "rank"}, Inputs: []string{"c", "p_max"}}},
			"plain":           {},
		},
	}
}

func TestQueryRanksBestFirst(t *testing.T) {
	r, err := New(testConfig(), NewMemoryStore())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		q      Query
		want   []string
		scores []float64
	}{
		{"the compact SACP registry example", Query{Verb: "predict", Inputs: []string{"history"}, OutputType: "predictions"}, []string{"price_predictor"}, []float64{1}},
		{"verb only", Query{Verb: "predict"}, []string{"price_predictor", "trend"}, []float64{0.4, 0.4}},
		{"verb and inputs rank", Query{Verb: "predict", Inputs: []string{"method", "window", "lag"}}, []string{"price_predictor", "trend"}, []float64{0.6, 0.4}},
		{"output type through the verb definition", Query{OutputType: "list"}, []string{"hotel_search"}, []float64{0.3}},
		{"case-insensitive", Query{Verb: "PREDICT", OutputType: "Predictions"}, []string{"price_predictor"}, []float64{0.7}},
		{"inputs only drop non-takers", Query{Inputs: []string{"history"}}, []string{"price_predictor", "trend"}, []float64{0.3, 0.3}},
		{"nothing matches", Query{Verb: "fly"}, []string{}, []float64{}},
		{"a verb asked by its alias", Query{Verb: "s"}, []string{"hotel_search"}, []float64{0.4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Query(context.Background(), tc.q)
			if err != nil {
				t.Fatal(err)
			}
			ans, err := r.Search(context.Background(), "orch", tc.q, 0)
			if err != nil {
				t.Fatal(err)
			}
			// Search answers a query without text exactly as Query.
			for _, ms := range [][]Match{got, ans.Data} {
				names, scores := []string{}, []float64{}
				for _, m := range ms {
					names = append(names, m.AgentName)
					scores = append(scores, m.Score)
				}
				if !slices.Equal(names, tc.want) || !slices.Equal(scores, tc.scores) {
					t.Errorf("got %v %v, want %v %v", names, scores, tc.want, tc.scores)
				}
			}
			if ans.Ranking != RankStructural || (len(tc.want) == 0) != (ans.Suggestion != nil) {
				t.Errorf("ranking %q, suggestion %+v", ans.Ranking, ans.Suggestion)
			}
		})
	}
}

// TestSpawnedAgentsShareTheLibrary covers both stores: a spawned agent is
// found by name and by query, its tool joins the library, a second spawn
// of the name is ErrExists, and a spawn that uses a verb another spawn
// defined loads whatever the order (names sort the other way round).
func TestSpawnedAgentsShareTheLibrary(t *testing.T) {
	stores := map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemoryStore() },
		"redis": func(t *testing.T) Store {
			srv := testredis.Start(t)
			return NewRedisStore(srv.Client(t), "test")
		},
	}
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := mk(t)
			r1, _ := New(testConfig(), store)
			r2, _ := New(testConfig(), store) // another replica
			lib, _ := r1.Library(ctx)
			sp, res := lib.ParseSpawn([]byte(`{"g":"SPAWN_AGENT","ctx":{"missing_capability":"visa"},"plan":[["define","VISA_Q",{"description":"Visa rules","inputs":["nationality"],"outputs":["visa_required"]}],["instantiate","Z_VISA",{"tool":"VISA_Q","verb":"check","endpoint":"http://visa"}]]}`))
			if !res.Valid() {
				t.Fatalf("%+v", res)
			}
			if _, err := r1.Spawn(ctx, sp, "agent:orch", ""); err != nil {
				t.Fatal(err)
			}
			if _, err := r1.Spawn(ctx, sp, "agent:orch", ""); !errors.Is(err, ErrExists) {
				t.Errorf("second spawn: %v", err)
			}
			lib, _ = r1.Library(ctx)
			sp2, res := lib.ParseSpawn([]byte(`{"g":"SPAWN_AGENT","plan":[["define","TAX_Q",{"description":"Tax rules"}],["instantiate","A_TAX",{"tool":"TAX_Q","verb":"check"}]]}`))
			if !res.Valid() {
				t.Fatalf("%+v", res)
			}
			if _, err := r1.Spawn(ctx, sp2, "person:ops", ""); err != nil {
				t.Fatal(err)
			}
			r2.ttl = 0
			for _, name := range []string{"Z_VISA", "A_TAX"} {
				e, ok, err := r2.Lookup(ctx, name)
				if err != nil || !ok || !e.Spawned {
					t.Errorf("replica 2 lookup %s: %+v %v %v", name, e, ok, err)
				}
			}
			e, _, _ := r2.Lookup(ctx, "Z_VISA")
			if e.Endpoint != "http://visa" || e.SpawnedBy != "agent:orch" {
				t.Errorf("stored entry %+v", e)
			}
			lib2, _ := r2.Library(ctx)
			for _, plan := range []string{`[["check","VISA_Q",{}]]`, `[["check","TAX_Q",{}]]`} {
				if res := lib2.Validate([]byte(`{"g":"X","plan":` + plan + `}`)); !res.Valid() {
					t.Errorf("plan %s with a spawned tool: %+v", plan, res)
				}
			}
			got, _ := r2.Query(ctx, Query{Verb: "check"})
			if len(got) != 2 {
				t.Errorf("query for spawned agents: %+v", got)
			}
		})
	}
}

func TestLibraryRefusesUnknownVerb(t *testing.T) {
	_, err := Library(config.Registry{Tools: []config.Tool{{ID: "T", SupportedVerbs: []string{"nope"}}}})
	if err == nil {
		t.Fatal("a tool naming an unknown verb was accepted")
	}
}

// TestRolesReload: the roles an agent may claim are agents.yaml's as
// reloaded, like its other fields, and are not shown to agents.
func TestRolesReload(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.Agents["plain"].Type, cfg.Agents["plain"].Roles = "vendor", []string{"initiator"}
	r, err := New(cfg, NewMemoryStore())
	if err != nil {
		t.Fatal(err)
	}
	claims := func(role string) bool {
		t.Helper()
		e, ok, err := r.Lookup(ctx, "plain")
		if !ok || err != nil {
			t.Fatalf("lookup: %v %v", ok, err)
		}
		return e.MayClaim(role)
	}
	if !claims("vendor") || !claims("initiator") || claims("validator") || claims("") {
		t.Fatal("roles as configured are not what the agent may claim")
	}
	cfg.Agents["plain"].Roles = []string{"validator"}
	apply, err := r.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	apply()
	if !claims("vendor") || claims("initiator") || !claims("validator") {
		t.Fatal("a reload did not change the roles")
	}
	e, _, _ := r.Lookup(ctx, "plain")
	if b, _ := json.Marshal(e); strings.Contains(string(b), "validator") {
		t.Errorf("entry shows its roles: %s", b)
	}
}
