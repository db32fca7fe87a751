package approval

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/testkit"
)

// writeCatalogue writes files (path relative to the catalogue → content)
// into a new directory and returns it.
func writeCatalogue(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func spec(id, typ string, refs ...string) string {
	fm := "---\nid: " + id + "\ntype: " + typ + "\n"
	if len(refs) > 0 {
		fm += "references: [" + strings.Join(refs, ", ") + "]\n"
	}
	return fm + "---\n# " + id + "\n"
}

// factsCatalogue has a cycle already (arch-001 ↔ design-001), a chain
// (docs-001 → req-045 → std-001) and two templates: a structured one for
// designs and a prose one for docs.
var factsCatalogue = map[string]string{
	"arch-001.md":   spec("arch-001", "architecture", "design-001"),
	"design-001.md": spec("design-001", "design", "arch-001"),
	"docs-001.md":   spec("docs-001", "docs", "req-045"),
	"req-045.md":    spec("req-045", "requirement", "std-001"),
	"std-001.md":    spec("std-001", "code"),
	"templates/design.json": `{"type": "object", "required": ["title", "owner"],
		"properties": {"title": {"type": "string", "minLength": 3}, "owner": {"type": "string", "format": "email"}}}`,
	"templates/docs.json": `{"type": "string", "pattern": "^# "}`,
}

// factsHarness serves factsCatalogue. References are not enforced by the
// test policy, so requests may cite the ids the gateway assigns.
func factsHarness(t *testing.T, opts ...option) *harness {
	t.Helper()
	cat, err := LoadCatalogue(writeCatalogue(t, factsCatalogue))
	if err != nil {
		t.Fatal(err)
	}
	return newHarness(t, append([]option{func(d *Deps) {
		d.Catalogue = cat
		d.Config.Protocol.Compliance.EnforceReferences = false
	}}, opts...)...)
}

func TestAssignedID(t *testing.T) {
	const hex = "1d2142b69f881fb0dc843bbfb553ce70"
	for _, tc := range []struct {
		typ, want string
	}{
		{"design", "design-" + hex},
		{"architecture", "architecture-" + hex},
		{"code", "code-" + hex},
		{"", "node-" + hex},
	} {
		got := AssignedID(tc.typ, "req-"+hex)
		if got != tc.want {
			t.Errorf("AssignedID(%q) = %q, want %q", tc.typ, got, tc.want)
		}
		if !specID.MatchString(got) {
			t.Errorf("%q is not a valid catalogue id", got)
		}
		typ, rid, ok := assignedRequest(got)
		if !ok || typ != tc.typ || rid != "req-"+hex {
			t.Errorf("assignedRequest(%q) = %q %q %v", got, typ, rid, ok)
		}
	}
	for _, id := range []string{"design-001", "req-" + hex, "design-" + strings.ToUpper(hex), "design-" + hex[1:], "spec-" + hex, "design-" + hex + "0", ""} {
		if _, _, ok := assignedRequest(id); ok {
			t.Errorf("%q taken for an assigned id", id)
		}
	}
}

func TestTemplateCheck(t *testing.T) {
	design := `{"type": "object", "required": ["title"], "additionalProperties": false,
		"properties": {"title": {"type": "string", "minLength": 3}, "owner": {"type": "string", "format": "email"}}}`
	many := `{"type": "object", "additionalProperties": {"type": "integer"}}`
	for _, tc := range []struct {
		note, schema, content string
		want                  []string // prefixes of the errors, in order
	}{
		{"object matches", design, `{"title": "Login", "owner": "a@example.org"}`, nil},
		{"missing property", design, `{"owner": "a@example.org"}`, []string{"/: missing property"}},
		{"errors sorted by location", design, `{"title": "x", "owner": "nope"}`, []string{"/owner: ", "/title: "}},
		{"format asserted", design, `{"title": "Login", "owner": "not an address"}`, []string{"/owner: "}},
		{"unknown property", design, `{"title": "Login", "extra": 1}`, []string{"/: additional"}},
		{"prose is a string", design, "# Login design\nNot JSON.", []string{"/: got string, want object"}},
		{"prose matches a string template", `{"type": "string", "pattern": "^# "}`, "# Title\nbody", nil},
		{"prose off a string template", `{"type": "string", "pattern": "^# "}`, "Title\nbody", []string{"/: "}},
		{"a JSON string is its value", `{"type": "string", "const": "ok"}`, `"ok"`, nil},
		{"capped", many, `{` + numbered(25) + `}`, append(slices.Repeat([]string{"/k"}, maxTemplateErrors), "... and 5 more errors")},
	} {
		t.Run(tc.note, func(t *testing.T) {
			tpl, err := NewTemplate([]byte(tc.schema), "templates/x.json")
			if err != nil {
				t.Fatal(err)
			}
			got := tpl.Check(tc.content)
			if len(got) != len(tc.want) {
				t.Fatalf("errors %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("error %d %q, want prefix %q", i, got[i], w)
				}
			}
		})
	}
}

// numbered is n members "k0": "x", … of a JSON object.
func numbered(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%q: \"x\"", fmt.Sprintf("k%02d", i))
	}
	return strings.Join(parts, ", ")
}

func TestCatalogueTemplatesAndReferences(t *testing.T) {
	_, err := LoadCatalogue(writeCatalogue(t, map[string]string{
		"a.md": spec("a", "design", "b", "c"),
		// templates/ holds templates only: a Markdown file there is not a
		// specification (this one has no front matter, and is not read as
		// one), and not a template either.
		"templates/README.md": "# Templates\n",
	}))
	if err == nil {
		t.Fatal("a README in templates/ was accepted")
	}
	if !strings.Contains(err.Error(), "README.md") || !strings.Contains(err.Error(), "<target_type>.json") || strings.Contains(err.Error(), "front matter") {
		t.Fatalf("error %v does not say what templates/ may hold", err)
	}

	c, err := LoadCatalogue(writeCatalogue(t, factsCatalogue))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := c.Get("arch-001"); !slices.Equal(s.References, []string{"design-001"}) {
		t.Errorf("arch-001 references %v", s.References)
	}
	if tpl, ok := c.Template("design"); !ok || tpl.Name != "templates/design.json" {
		t.Errorf("design template %+v %v", tpl, ok)
	}
	if _, ok := c.Template("code"); ok {
		t.Error("code has a template")
	}
	if slices.Contains(c.IDs(), "templates") || c.Len() != 5 {
		t.Errorf("ids %v", c.IDs())
	}

	for _, tc := range []struct{ note, name, text, want string }{
		{"unknown target type", "templates/desing.json", `{"type": "object"}`, "desing.json"},
		{"not JSON", "templates/design.json", `{"type": `, "design.json"},
		{"not a schema", "templates/design.json", `{"type": "thing"}`, "design.json"},
		{"ref to a file", "templates/design.json", `{"$ref": "other.json"}`, "self-contained"},
		{"ref to a URL", "templates/code.json", `{"$ref": "https://example.org/s.json"}`, "self-contained"},
		{"reference not an id", "b.md", "---\nid: b\nreferences: [Not An Id]\n---\n", "not a specification id"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			_, err := LoadCatalogue(writeCatalogue(t, map[string]string{"a.md": spec("a", "design"), tc.name: tc.text}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// The facts in the policy input, as the gateway looks them up.
func TestFactsInPolicyInput(t *testing.T) {
	h := factsHarness(t)
	type want struct {
		target  map[string]any // expected keys only
		content map[string]any
		refs    map[string]any
		reason  string // part of content_check.reason
		errors  []string
	}
	base := func(fields map[string]any) map[string]any {
		req := approvalRequest()
		req["references"] = []string{}
		for k, v := range fields {
			if v == nil {
				delete(req, k)
			} else {
				req[k] = v
			}
		}
		return req
	}
	noCycle := map[string]any{"checked": true, "cycle": []any{}, "through_target": false, "complete": true}
	for _, tc := range []struct {
		note string
		req  map[string]any
		want want
	}{
		{"a create by path, content on its template",
			base(map[string]any{"content": `{"title": "Login", "owner": "a@example.org"}`, "references": []string{"req-045"}}),
			want{target: map[string]any{"checked": false, "exists": false, "source": ""},
				content: map[string]any{"checked": true, "valid": true, "template": "templates/design.json"}, refs: noCycle}},
		{"a create, content off its template",
			base(map[string]any{"content": `{"title": "x", "owner": "nope"}`}),
			want{content: map[string]any{"checked": true, "valid": false}, errors: []string{"/owner: ", "/title: "}, refs: noCycle}},
		{"prose on a string template", base(map[string]any{"target_type": "docs", "content": "# Docs\n"}),
			want{content: map[string]any{"checked": true, "valid": true, "template": "templates/docs.json"}}},
		{"no template for the type", base(map[string]any{"target_type": "code"}),
			want{content: map[string]any{"checked": false, "valid": nil}, reason: `no content template for target type "code"`}},
		{"a delete of a catalogue target", base(map[string]any{"action": "delete", "target_id": "design-001", "target_path": nil}),
			want{target: map[string]any{"checked": true, "exists": true, "source": "catalogue", "assigned_id": ""},
				content: map[string]any{"checked": false}, reason: "a delete carries no content"}},
		{"a modify of an unknown design", base(map[string]any{"action": "modify", "target_id": "design-999"}),
			want{target: map[string]any{"checked": true, "exists": false, "id": "design-999", "assigned_id": ""}}},
		{"a modify of code the gateway cannot know", base(map[string]any{"action": "modify", "target_type": "code", "target_id": "src/main.go"}),
			want{target: map[string]any{"checked": false, "exists": false}}},
		{"a modify of code in the catalogue", base(map[string]any{"action": "modify", "target_type": "code", "target_id": "std-001"}),
			want{target: map[string]any{"checked": true, "exists": true, "source": "catalogue"}}},
		{"references into a cycle already there", base(map[string]any{"references": []string{"req-045", "arch-001"}}),
			want{refs: map[string]any{"cycle": []any{"arch-001", "design-001", "arch-001"}, "through_target": false, "complete": true}}},
		{"a modify that closes a cycle", base(map[string]any{"action": "modify", "target_id": "req-045", "references": []string{"docs-001"}}),
			want{refs: map[string]any{"cycle": []any{"req-045", "docs-001", "req-045"}, "through_target": true}}},
		{"a target citing itself", base(map[string]any{"action": "modify", "target_id": "std-001", "references": []string{"std-001", "std-001"}}),
			want{refs: map[string]any{"cycle": []any{"std-001", "std-001"}, "through_target": true}}},
		{"a QUERY checks nothing",
			map[string]any{"agent_id": "claude-3", "request_type": "QUERY", "content": "auth?", "references": []string{"arch-001"}},
			want{content: map[string]any{"checked": false}, refs: map[string]any{"checked": false, "cycle": []any{}}, reason: "only the content of an APPROVAL or VALIDATE"}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			res, resp := h.submit(tokClaude, tc.req)
			mustStatus(t, res, http.StatusOK)
			in := h.decider.lastInput()
			target, content, refs := in["target"].(map[string]any), in["content_check"].(map[string]any), in["references"].(map[string]any)
			for _, part := range []map[string]any{target, content, refs} {
				if len(part) == 0 {
					t.Fatalf("a fact is missing from the input: %v", in)
				}
			}
			if tc.req["request_type"] == TypeApproval && tc.req["action"] == ActionCreate {
				if want := AssignedID(tc.req["target_type"].(string), resp.RequestID); target["assigned_id"] != want {
					t.Errorf("assigned_id %v, want %s", target["assigned_id"], want)
				}
			}
			for _, c := range []struct {
				name      string
				got, want map[string]any
			}{{"target", target, tc.want.target}, {"content_check", content, tc.want.content}, {"references", refs, tc.want.refs}} {
				for k, w := range c.want {
					if g := c.got[k]; fmt.Sprint(g) != fmt.Sprint(w) {
						t.Errorf("%s.%s = %v, want %v", c.name, k, g, w)
					}
				}
			}
			if !strings.Contains(content["reason"].(string), tc.want.reason) {
				t.Errorf("content_check.reason %q, want %q in it", content["reason"], tc.want.reason)
			}
			if tc.want.errors != nil {
				errs := content["errors"].([]any)
				if len(errs) != len(tc.want.errors) {
					t.Fatalf("content_check.errors %v, want %v", errs, tc.want.errors)
				}
				for i, w := range tc.want.errors {
					if !strings.HasPrefix(errs[i].(string), w) {
						t.Errorf("error %d %q, want prefix %q", i, errs[i], w)
					}
				}
			}
		})
	}
}

// Targets the gateway created exist once their CREATE is REPORTed done, and
// their references are followed like a specification's.
func TestFactsOfGatewayCreatedTargets(t *testing.T) {
	h := factsHarness(t)
	create := func(refs ...string) (id, assigned string) {
		t.Helper()
		req := approvalRequest()
		req["references"] = refs
		res, resp := h.submit(tokClaude, req)
		mustStatus(t, res, http.StatusOK)
		if resp.State != StateApproved || resp.AssignedID == nil {
			t.Fatalf("create: %s", res.body)
		}
		return resp.RequestID, *resp.AssignedID
	}
	report := func(id string) {
		t.Helper()
		res, rep := h.submit(tokClaude, map[string]any{"agent_id": "claude-3", "request_type": "REPORT", "request_id": id,
			"completed": true, "changes_made": "created"})
		if res.status != http.StatusOK || rep.State != StateCompleted {
			t.Fatalf("report: %s", res.body)
		}
	}
	target := func(fields map[string]any) (map[string]any, map[string]any) {
		t.Helper()
		req := approvalRequest()
		for k, v := range fields {
			req[k] = v
		}
		res, _ := h.submit(tokClaude, req)
		mustStatus(t, res, http.StatusOK)
		in := h.decider.lastInput()
		return in["target"].(map[string]any), in["references"].(map[string]any)
	}

	aID, a := create()
	tgt, _ := target(map[string]any{"action": "modify", "target_id": a})
	if tgt["checked"] != true || tgt["exists"] != false {
		t.Fatalf("approved but not reported: %v", tgt)
	}
	report(aID)
	tgt, _ = target(map[string]any{"action": "modify", "target_id": a})
	if tgt["checked"] != true || tgt["exists"] != true || tgt["source"] != "gateway" {
		t.Fatalf("created: %v", tgt)
	}
	// The same hex digits under another target type name no creation.
	tgt, _ = target(map[string]any{"action": "modify", "target_id": "code-" + strings.TrimPrefix(aID, "req-")})
	if tgt["checked"] != true || tgt["exists"] != false {
		t.Fatalf("other type: %v", tgt)
	}
	tgt, _ = target(map[string]any{"action": "modify", "target_id": AssignedID("design", newID())})
	if tgt["checked"] != true || tgt["exists"] != false {
		t.Fatalf("never assigned: %v", tgt)
	}

	// c cites a; a modify of a citing c closes the cycle through the
	// gateway's own records.
	cID, c := create(a)
	report(cID)
	_, refs := target(map[string]any{"action": "modify", "target_id": a, "references": []string{"req-045", c}})
	if fmt.Sprint(refs["cycle"]) != fmt.Sprint([]any{a, c, a}) || refs["through_target"] != true {
		t.Fatalf("cycle through records: %v", refs)
	}
}

// A chain of records longer than the walk may read: no cycle is claimed,
// and the walk says it was cut short.
func TestFactsReferenceWalkIsBounded(t *testing.T) {
	h := factsHarness(t)
	ids := make([]string, maxRefLookups+6)
	for i := range ids {
		ids[i] = newID()
	}
	for i, id := range ids {
		var refs []string
		if i+1 < len(ids) {
			refs = []string{AssignedID("design", ids[i+1])}
		}
		rec := &Record{ID: id, AgentID: "claude-3", State: StateCompleted,
			Request: AgentRequest{RequestType: TypeApproval, Action: ActionCreate, TargetType: "design", References: refs}}
		if err := h.store.Create(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		start    int
		complete bool
	}{
		{len(ids) - maxRefLookups, true},      // exactly the bound
		{len(ids) - maxRefLookups - 1, false}, // one more
		{0, false},
	} {
		req := approvalRequest()
		req["references"] = []string{AssignedID("design", ids[tc.start])}
		h.submit(tokClaude, req)
		refs := h.decider.lastInput()["references"].(map[string]any)
		if refs["complete"] != tc.complete || len(refs["cycle"].([]any)) != 0 {
			t.Errorf("chain of %d: %v, want complete %v", len(ids)-tc.start, refs, tc.complete)
		}
	}
}

// failingGets is a store whose reads fail on demand, as Redis would.
type failingGets struct {
	*MemoryStore
	fail atomic.Bool
}

func (f *failingGets) Get(ctx context.Context, id string) (*Record, error) {
	if f.fail.Load() {
		return nil, errBoom
	}
	return f.MemoryStore.Get(ctx, id)
}

// Facts that cannot be looked up deny the request without asking the
// policy (fail closed), and the audit entry says why.
func TestFactsUnavailableFailClosed(t *testing.T) {
	store := &failingGets{MemoryStore: NewMemoryStore()}
	h := factsHarness(t, func(d *Deps) { d.Store = store })
	for _, tc := range []struct {
		note   string
		fields map[string]any
	}{
		{"target lookup", map[string]any{"action": "modify", "target_id": AssignedID("design", newID())}},
		{"reference walk", map[string]any{"references": []string{AssignedID("design", newID())}}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			req := approvalRequest()
			for k, v := range tc.fields {
				req[k] = v
			}
			store.fail.Store(true)
			h.decider.mu.Lock()
			calls := h.decider.calls
			h.decider.mu.Unlock()
			res, resp := h.submit(tokClaude, req)
			store.fail.Store(false)
			mustStatus(t, res, http.StatusOK)
			if resp.Status != StatusRejected || resp.State != StateRejected || resp.Confidence != 0 ||
				len(resp.Violations) != 1 || resp.Violations[0].Rule != violationFacts {
				t.Fatalf("response %s", res.body)
			}
			h.decider.mu.Lock()
			asked := h.decider.calls != calls
			h.decider.mu.Unlock()
			if asked {
				t.Error("the policy was asked without its facts")
			}
			e := h.audit.ByKind(audit.KindAgentDecision)
			last := e[len(e)-1]
			if last.RequestID != resp.RequestID || !strings.Contains(fmt.Sprint(testkit.SummaryOf(last)["error"]), "facts: ") {
				t.Errorf("audit %+v", last)
			}
		})
	}
}
