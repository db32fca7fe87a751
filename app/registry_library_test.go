package app

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/roster"
)

// listBody decodes a {"object": "list", "data": [...]} answer of path as
// token, failing on any other status or shape.
func listBody(t *testing.T, g *a2a, path, token string) []map[string]any {
	t.Helper()
	status, body, hdr := g.do(http.MethodGet, path, token, "")
	if status != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("GET %s: %d %s %s", path, status, hdr.Get("Content-Type"), body)
	}
	var ans struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil || ans.Object != "list" || len(ans.Data) == 0 {
		t.Fatalf("GET %s: want a non-empty list: %v %s", path, err, body)
	}
	return ans.Data
}

func byKey(t *testing.T, data []map[string]any, key, value string) map[string]any {
	t.Helper()
	for _, d := range data {
		if d[key] == value {
			return d
		}
	}
	t.Fatalf("no %s %q in %v", key, value, data)
	return nil
}

func strs(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, s := range list {
		str, _ := s.(string)
		out = append(out, str)
	}
	return out
}

// TestRegistryVerbs: an agent reads the verb library with each verb's
// aliases, inputs and outputs, as seed-shaped definitions a planner can
// write plans from.
func TestRegistryVerbs(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	verbs := listBody(t, g, "/registry/verbs", "tok-outsider")
	search := byKey(t, verbs, "name", "search")
	if !slices.Equal(strs(search["aliases"]), []string{"s"}) || search["outputs"] != "list" || search["description"] == "" ||
		!slices.Contains(strs(search["inputs"]), "p_max:number") {
		t.Fatalf("search verb: %v", search)
	}
	analyze := byKey(t, verbs, "name", "analyze")
	if in, ok := analyze["inputs"].([]any); !ok || len(in) != 0 {
		t.Fatalf("a verb without inputs lists none ([]), not null: %v", analyze)
	}
	names := make([]string, 0, len(verbs))
	for _, v := range verbs {
		names = append(names, v["name"].(string))
	}
	if !slices.IsSorted(names) {
		t.Errorf("verbs not sorted by name: %v", names)
	}
}

// TestRegistryTools: an agent reads the tool library, each tool with the
// verbs it supports.
func TestRegistryTools(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	tools := listBody(t, g, "/registry/tools", "tok-planner_1")
	hAPI := byKey(t, tools, "id", "H_API")
	if !slices.Contains(strs(hAPI["supported_verbs"]), "search") || hAPI["description"] == "" {
		t.Fatalf("H_API tool: %v", hAPI)
	}
}

// TestRegistryAgents: an agent sees every agent as /registry/query shows
// it (seed fields), never another agent's endpoint, token hash or
// embedding.
func TestRegistryAgents(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	agents := listBody(t, g, "/registry/agents", "tok-outsider")
	planner := byKey(t, agents, "agent_name", "planner_1")
	if !slices.Equal(strs(planner["supported_verbs"]), []string{"predict"}) ||
		!slices.Equal(strs(planner["supported_tools"]), []string{"PRC_EST"}) ||
		!slices.Equal(strs(planner["inputs"]), []string{"ctx.history", "method", "window"}) ||
		!slices.Equal(strs(planner["outputs"]), []string{"predictions"}) ||
		planner["description"] != "Plans workflows and predicts prices" {
		t.Fatalf("planner_1: %v", planner)
	}
	byKey(t, agents, "agent_name", "orch_1")
	status, body, _ := g.do(http.MethodGet, "/registry/agents", "tok-outsider", "")
	if status != http.StatusOK {
		t.Fatalf("GET /registry/agents: %d", status)
	}
	for _, secret := range []string{"endpoint", "token", "embedding", g.peers["planner_1"].Srv.URL, "tok-"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("the agent list shows %q: %s", secret, body)
		}
	}
}

// TestRegistryLibraryUnauthenticated: the library routes answer no one
// without a valid agent token.
func TestRegistryLibraryUnauthenticated(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	for _, path := range []string{"/registry/verbs", "/registry/tools", "/registry/agents"} {
		for _, token := range []string{"", "tok-nobody"} {
			status, body, _ := g.do(http.MethodGet, path, token, "")
			if status != http.StatusUnauthorized || !strings.Contains(string(body), `"invalid_api_key"`) || strings.Contains(string(body), "search") || strings.Contains(string(body), "planner_1") {
				t.Errorf("GET %s with token %q: %d %s, want 401 invalid_api_key and nothing of the library", path, token, status, body)
			}
		}
	}
}

// TestRegistryListsSpawned: an agent spawned at run time is listed with
// the tool it defined, at once, without its token or its token's hash.
func TestRegistryListsSpawned(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	status, body, _ := g.do(http.MethodPost, "/registry/spawn", "tok-orch_1", `{"g":"SPAWN_AGENT","plan":[["define","VISA_Q",{"description":"Visa rules","inputs":["nationality"],"outputs":["visa_required"]}],["instantiate","VISA_AGENT",{"tool":"VISA_Q","verb":"check"}]]}`)
	if status != http.StatusCreated {
		t.Fatalf("spawn: %d %s", status, body)
	}
	var spawned struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(body, &spawned); err != nil || spawned.Token == "" {
		t.Fatalf("spawn answer %s: want a token", body)
	}
	tool := byKey(t, listBody(t, g, "/registry/tools", "tok-outsider"), "id", "VISA_Q")
	if !slices.Equal(strs(tool["supported_verbs"]), []string{"check"}) {
		t.Errorf("the spawned tool: %v", tool)
	}
	byKey(t, listBody(t, g, "/registry/verbs", "tok-outsider"), "name", "check")
	agent := byKey(t, listBody(t, g, "/registry/agents", "tok-outsider"), "agent_name", "VISA_AGENT")
	if agent["spawned"] != true || agent["spawned_by"] != "agent:orch_1" {
		t.Errorf("the spawned agent: %v", agent)
	}
	_, list, _ := g.do(http.MethodGet, "/registry/agents", "tok-outsider", "")
	if strings.Contains(string(list), spawned.Token) || strings.Contains(string(list), roster.HashTokenHex(spawned.Token)) {
		t.Errorf("the agent list shows the spawned agent's token or its hash: %s", list)
	}
}
