package admin

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestOpenAPIMatchesRoutes: every /admin route the door serves is in
// /openapi.json with its method, and nothing is documented that is not
// served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Fatalf("openapi.json: %v (version %q)", err, doc.OpenAPI)
	}
	var documented, served []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	h := newHarness(t, "")
	for _, r := range h.api.Routes() {
		if strings.HasPrefix(r.Path, "/admin/") || r.Path == "/admin" {
			served = append(served, strings.TrimSuffix(r.Pattern(), "{$}"))
		}
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Errorf("documented:\n  %s\nserved:\n  %s", strings.Join(documented, "\n  "), strings.Join(served, "\n  "))
	}
	st, body := h.do("", http.MethodGet, "/openapi.json", "")
	if st != http.StatusOK || body != string(OpenAPI()) {
		t.Errorf("GET /openapi.json without signing in: %d", st)
	}
}

// TestOpenAPISchemasHoldAnswers: the API's answers are what the document
// says they are (its schemas, JSON Schema 2020-12), and the document's
// request schema refuses an unknown field as the API does.
func TestOpenAPISchemasHoldAnswers(t *testing.T) {
	raw, err := jsonschema.UnmarshalJSON(strings.NewReader(string(OpenAPI())))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem:///openapi.json", raw); err != nil {
		t.Fatal(err)
	}
	schema := func(ptr string) *jsonschema.Schema {
		s, err := c.Compile("mem:///openapi.json#" + ptr)
		if err != nil {
			t.Fatalf("%s: %v", ptr, err)
		}
		return s
	}
	check := func(ptr, doc string, want bool) {
		t.Helper()
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
		if err != nil {
			t.Fatalf("%s is not JSON", doc)
		}
		if err := schema(ptr).Validate(inst); (err == nil) != want {
			t.Errorf("%s against %s: %v, want valid=%v", doc, ptr, err, want)
		}
	}
	h := newHarness(t, "")
	agentIn := `{"name":"s-1","type":"coder","rate_limit":"10/minute","messages":[{"to":["file-agent"],"actions":["ping"]}]}`
	check("/components/schemas/AgentInput", agentIn, true)
	check("/components/schemas/AgentInput", `{"name":"s-2","rate_limt":"1/hour"}`, false)
	check("/components/schemas/Agent", h.must("admin", "POST", "/admin/agents", agentIn, 201), true)
	check("/components/schemas/Agent", h.must("admin", "GET", "/admin/agents/file-agent", "", 200), true)
	check("/paths/~1admin~1agents/get/responses/200/content/application~1json/schema", h.must("admin", "GET", "/admin/agents", "", 200), true)
	check("/components/schemas/IssuedKey", h.must("admin", "POST", "/admin/agents/s-1/keys", `{"expires_in":"24h"}`, 201), true)
	check("/paths/~1admin~1agents~1{name}~1keys/get/responses/200/content/application~1json/schema", h.must("admin", "GET", "/admin/agents/s-1/keys", "", 200), true)
	check("/components/schemas/Team", h.must("admin", "POST", "/admin/teams", `{"name":"ops","token_limit":"1000/hour"}`, 201), true)
	_, e := h.do("admin", "GET", "/admin/agents/none", "")
	check("/components/schemas/Error", e, true)
}
