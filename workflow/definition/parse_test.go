package definition

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testAgents is the agent registry of the tests: researcher and
// email-validator speak the protocol, claude-3 and legacy-bot exist but do
// not.
func testAgents(id string) (exists, protocol bool) {
	switch id {
	case "researcher", "email-validator":
		return true, true
	case "claude-3", "legacy-bot":
		return true, false
	}
	return false, false
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseExample(t *testing.T) {
	set, err := Parse(readTestdata(t, "example.yaml"), testAgents)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := set.Names(); !slices.Equal(got, []string{"find-ceo-email"}) {
		t.Fatalf("Names() = %v", got)
	}
	w := set.Get("find-ceo-email")
	if w == nil {
		t.Fatal("Get(find-ceo-email) = nil")
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Name", w.Name, "find-ceo-email"},
		{"Description", w.Description, "Find and validate the e-mail of a company's CEO"},
		{"Callers", strings.Join(w.Callers, ","), "claude-3"},
		{"Start", w.Start, "research"},
		{"MaxSteps", w.MaxSteps, 20},
		{"MaxNegotiationRounds", w.MaxNegotiationRounds, 2},
		{"Line", w.Line, 2},
		{"NodeOrder", strings.Join(w.NodeOrder, ","), "research,validate"},
		{"research.Name", w.Nodes["research"].Name, "research"},
		{"research.Agent", w.Nodes["research"].Agent, "researcher"},
		{"research.Model", w.Nodes["research"].Model, "gpt-4o-mini"},
		{"research.Input", w.Nodes["research"].Input.String(), "Find the e-mail of the CEO of {{input.company}}."},
		{"research.Owns", strings.Join(w.Nodes["research"].Owns, ","), "vendor"},
		{"research.Timeout", w.Nodes["research"].Timeout, 60 * time.Second},
		{"research.Line", w.Nodes["research"].Line, 9},
		{"validate.Agent", w.Nodes["validate"].Agent, "email-validator"},
		{"validate.Model", w.Nodes["validate"].Model, ""},
		{"validate.Timeout", w.Nodes["validate"].Timeout, time.Duration(0)},
		{"validate.Input.Nodes", strings.Join(w.Nodes["validate"].Input.Nodes(), ","), "research"},
		{"validate.Line", w.Nodes["validate"].Line, 15},
		{"len(Edges)", len(w.Edges), 2},
		{"edge0", w.Edges[0].From + ">" + w.Edges[0].To, "research>validate"},
		{"edge0.When", w.Edges[0].When.String(), `response.status == "success"`},
		{"edge0.Line", w.Edges[0].Line, 19},
		{"edge1", w.Edges[1].From + ">" + w.Edges[1].To, "research>failed"},
		{"edge1.Line", w.Edges[1].Line, 20},
		{"EdgesFrom(research)", len(w.EdgesFrom("research")), 2},
		{"EdgesFrom(validate)", len(w.EdgesFrom("validate")), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	if from := w.EdgesFrom("research"); len(from) == 2 && (from[0] != w.Edges[0] || from[1] != w.Edges[1]) {
		t.Error("EdgesFrom(research) is not in declaration order")
	}
}

func TestParseDefaults(t *testing.T) {
	src := `workflows:
  w:
    start: a
    nodes:
      a: {agent: researcher, input: go}
`
	set, err := Parse([]byte(src), testAgents)
	if err != nil {
		t.Fatal(err)
	}
	w := set.Get("w")
	if w.MaxSteps != 20 || w.MaxNegotiationRounds != 2 {
		t.Errorf("defaults = %d/%d, want 20/2", w.MaxSteps, w.MaxNegotiationRounds)
	}
	if w.Callers != nil || w.Edges != nil || w.Nodes["a"].Timeout != 0 || w.Nodes["a"].Owns != nil {
		t.Errorf("absent optional fields are set: %+v %+v", w, w.Nodes["a"])
	}

	set, err = Parse([]byte(strings.Replace(src, "    start: a\n", "    start: a\n    max_steps: 1000\n    max_negotiation_rounds: 0\n", 1)), testAgents)
	if err != nil {
		t.Fatal(err)
	}
	if w := set.Get("w"); w.MaxSteps != 1000 || w.MaxNegotiationRounds != 0 {
		t.Errorf("limits = %d/%d, want 1000/0", w.MaxSteps, w.MaxNegotiationRounds)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, src := range []string{"", "# nothing yet\n", "workflows: {}\n", "workflows:\n", "~\n", "---\n"} {
		set, err := Parse([]byte(src), testAgents)
		if err != nil {
			t.Errorf("Parse(%q): %v", src, err)
			continue
		}
		if set == nil || set.Workflows == nil || len(set.Workflows) != 0 {
			t.Errorf("Parse(%q) = %+v, want an empty set", src, set)
		}
	}
}

func TestSetNilSafe(t *testing.T) {
	var s *Set
	if s.Get("x") != nil || s.Names() != nil {
		t.Error("nil *Set is not empty")
	}
}

// base is a valid file that the problem cases below vary; line numbers:
//
//	1 workflows:
//	2   w:
//	3     start: a
//	4     nodes:
//	5       a:
//	6         agent: researcher
//	7         input: "go {{input.x}}"
//	8       b:
//	9         agent: email-validator
//	10        input: "{{a.data}}"
//	11    edges:
//	12      - {from: a, to: b}
//	13      - {from: b, to: end}
const base = `workflows:
  w:
    start: a
    nodes:
      a:
        agent: researcher
        input: "go {{input.x}}"
      b:
        agent: email-validator
        input: "{{a.data}}"
    edges:
      - {from: a, to: b}
      - {from: b, to: end}
`

// vary replaces the first occurrence of old in base, failing the test when
// it is missing so that a case can never pass by not applying.
func vary(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(base, old) {
		t.Fatalf("base has no %q", old)
	}
	return strings.Replace(base, old, new, 1)
}

func TestParseBase(t *testing.T) {
	if _, err := Parse([]byte(base), testAgents); err != nil {
		t.Fatalf("base does not parse: %v", err)
	}
}

func TestParseProblems(t *testing.T) {
	cases := []struct {
		name     string
		old, new string // applied to base; old "" means new is the whole file
		line     int
		msg      string
	}{
		{"syntax error", "", "workflows:\n\tw: {}\n", 2, "YAML syntax error: found character that cannot start any token"},
		{"syntax error in flow", "", "workflows:\n  w: [}\n", 2, "YAML syntax error: did not find expected node content"},
		{"syntax error unclosed flow", "", "workflows:\n  w:\n    nodes: [a\n", 3, "YAML syntax error: did not find expected ',' or ']'"},
		{"syntax error on line 1", "", "workflows: [\n", 1, "YAML syntax error"},
		{"syntax error mapping value", "", "workflows:\n  w: a: b\n", 2, "YAML syntax error: mapping values are not allowed"},
		{"unknown anchor", "", "workflows:\n  w: *nowhere\n", 2, "YAML syntax error: unknown anchor 'nowhere' referenced"},
		{"top level not a mapping", "", "- workflows\n", 1, "top level must be a mapping, not a list"},
		{"unknown top key", "", "workflows: {}\nworkflow: {}\n", 2, `top level: unknown key "workflow"`},
		{"workflows not a mapping", "", "workflows: [a]\n", 1, "workflows must be a mapping, not a list"},
		{"second document", "", "workflows: {}\n---\nworkflows: {}\n", 3, "only one YAML document"},
		{"alias", "      - {from: b, to: end}\n", "      - &e {from: b, to: end}\n      - *e\n", 14, "YAML aliases (*e) are not supported"},
		{"bad workflow name", "  w:\n", "  Find_CEO:\n", 2, `workflow name "Find_CEO" must match`},
		{"unknown workflow key", "    start: a\n", "    start: a\n    max_step: 3\n", 4, `unknown key "max_step"`},
		{"duplicate workflow", "", base + "  w:\n    start: a\n", 14, `workflows: duplicate key "w" (first at line 2)`},
		{"duplicate workflow key", "    start: a\n", "    start: a\n    start: b\n", 4, `duplicate key "start" (first at line 3)`},
		{"duplicate node", "      b:\n", "      a:\n        agent: researcher\n        input: x\n      b:\n", 8, `nodes: duplicate key "a" (first at line 5)`},
		{"duplicate key in node", "        input: \"go {{input.x}}\"\n", "        input: \"go {{input.x}}\"\n        agent: researcher\n", 8, `node "a": duplicate key "agent" (first at line 6)`},
		{"unknown node key", "        agent: researcher\n", "        agent: researcher\n        retries: 3\n", 7, `node "a": unknown key "retries"`},
		{"unknown edge key", "{from: a, to: b}", "{from: a, to: b, if: x}", 12, `edge: unknown key "if"`},
		{"start missing", "    start: a\n", "", 2, "start is required"},
		{"start unknown", "    start: a\n", "    start: zz\n", 3, `start "zz" is not a node`},
		{"start not a string", "    start: a\n", "    start: [a]\n", 3, "start must be a single value, not a list"},
		{"no nodes key", "", "workflows:\n  w:\n    start: a\n", 2, "nodes is required"},
		{"nodes empty", "", "workflows:\n  w:\n    start: a\n    nodes: {}\n", 4, "at least one node"},
		{"nodes wrong type", "", "workflows:\n  w:\n    start: a\n    nodes: []\n", 4, "nodes must be a mapping, not a list"},
		{"agent missing", "        agent: researcher\n", "", 5, `node "a": agent is required`},
		{"unknown agent", "agent: researcher", "agent: ghost", 6, `agent "ghost" does not exist`},
		{"non-protocol agent", "agent: researcher", "agent: legacy-bot", 6, `agent "legacy-bot" does not speak the SACP JSON protocol`},
		{"input missing", "        input: \"go {{input.x}}\"\n", "", 5, `node "a": input is required`},
		{"unknown caller", "    start: a\n", "    callers: [claude-3, ghost]\n    start: a\n", 3, `caller "ghost" is not a known agent`},
		{"duplicate caller", "    start: a\n", "    callers: [claude-3, claude-3]\n    start: a\n", 3, `callers: "claude-3" is listed twice`},
		{"callers not a list", "    start: a\n", "    callers: claude-3\n    start: a\n", 3, "callers must be a list, not a string"},
		{"edge to unknown node", "{from: b, to: end}", "{from: b, to: ending}", 13, `edge to "ending": no such node`},
		{"edge from unknown node", "{from: b, to: end}", "{from: c, to: end}", 13, `edge from "c": no such node`},
		{"edge without to", "{from: b, to: end}", "{from: b}", 13, "edge: to is required"},
		{"edges not a list", "", strings.Replace(base, "    edges:\n      - {from: a, to: b}\n      - {from: b, to: end}\n", "    edges: {from: a}\n", 1), 11, "edges must be a list, not a mapping"},
		{"when syntax error", "{from: b, to: end}", `{from: b, to: end, when: 'response.status =='}`, 13, "when: syntax error"},
		{"when reads data", "{from: b, to: end}", `{from: b, to: end, when: 'data.secrets.key == "x"'}`, 13, "data is not available in a condition"},
		{"when unknown name", "{from: b, to: end}", `{from: b, to: end, when: 'reponse.status == "x"'}`, 13, `unknown name "reponse"`},
		{"when http.send", "{from: b, to: end}", `{from: b, to: end, when: 'http.send({"method": "get", "url": "http://x"}).status_code == 200'}`, 13, "function http.send is not allowed"},
		{"when not a string", "{from: b, to: end}", "{from: b, to: end, when: true}", 13, "when must be a string, not a boolean"},
		{"template unclosed", `input: "{{a.data}}"`, `input: "{{a.data"`, 10, `has no closing "}}"`},
		{"template unknown node", `input: "{{a.data}}"`, `input: "{{c.data}}"`, 10, `input refers to "c", which is not input, context or a node`},
		{"template unknown function", `input: "{{a.data}}"`, `input: "{{upper a.data}}"`, 10, `unknown function "upper"`},
		{"template empty", `input: "{{a.data}}"`, `input: ""`, 10, "input must not be empty"},
		{"timeout not a duration", "        agent: researcher\n", "        agent: researcher\n        timeout: soon\n", 7, `timeout "soon" is not a duration`},
		{"timeout too short", "        agent: researcher\n", "        agent: researcher\n        timeout: 500ms\n", 7, "timeout 500ms must be between 1s and 1h0m0s"},
		{"timeout too long", "        agent: researcher\n", "        agent: researcher\n        timeout: 2h\n", 7, "must be between 1s and 1h0m0s"},
		{"timeout a number", "        agent: researcher\n", "        agent: researcher\n        timeout: 60\n", 7, "timeout must be a string, not a number"},
		{"reserved node name end", "", reserved("end"), 6, `"end" is reserved`},
		{"reserved node name failed", "", reserved("failed"), 6, `"failed" is reserved`},
		{"reserved node name input", "", reserved("input"), 6, `"input" is reserved`},
		{"reserved node name context", "", reserved("context"), 6, `"context" is reserved`},
		{"bad node name", "", reserved("Node"), 6, "node name must match"},
		{"long node name", "", reserved("n" + strings.Repeat("x", 63)), 6, "node name must match"},
		{"unreachable node", "      - {from: a, to: b}\n", "      - {from: a, to: end}\n", 8, `node "b" is not reachable from start "a"`},
		{"entity owned twice", "", strings.NewReplacer("        agent: researcher\n", "        agent: researcher\n        owns: [vendor, person]\n", "        input: \"{{a.data}}\"\n", "        input: \"{{a.data}}\"\n        owns: [vendor]\n").Replace(base), 12, `entity "vendor" is owned by node "a" and node "b"`},
		{"entity listed twice", "        agent: researcher\n", "        agent: researcher\n        owns: [vendor, vendor]\n", 7, `owns: "vendor" is listed twice`},
		{"bad entity name", "        agent: researcher\n", "        agent: researcher\n        owns: [Vendor]\n", 7, `entity name "Vendor" must match`},
		{"max_steps too small", "    start: a\n", "    start: a\n    max_steps: 0\n", 4, "max_steps must be between 1 and 1000, not 0"},
		{"max_steps too large", "    start: a\n", "    start: a\n    max_steps: 1001\n", 4, "max_steps must be between 1 and 1000, not 1001"},
		{"max_steps not a number", "    start: a\n", "    start: a\n    max_steps: abc\n", 4, "max_steps must be an integer, not a string"},
		{"max_steps float", "    start: a\n", "    start: a\n    max_steps: 2.5\n", 4, "max_steps must be an integer, not a number"},
		{"negotiation out of range", "    start: a\n", "    start: a\n    max_negotiation_rounds: 11\n", 4, "max_negotiation_rounds must be between 0 and 10, not 11"},
		{"merge key", "      - {from: b, to: end}\n", "      - {from: b, to: end, <<: {when: x}}\n", 13, "merge keys (<<) are not supported"},
		{"registry agent without criterion", "agent: researcher", "agent: {inputs: [x]}", 6, "a registry-driven agent needs verb, output_type or text"},
		{"registry agent unknown key", "agent: researcher", "agent: {verb: check, agent_name: x}", 6, `agent: unknown key "agent_name"`},
		{"registry agent empty text", "agent: researcher", `agent: {text: " "}`, 6, "text must not be empty"},
		{"registry agent bad endpoint", "agent: researcher", "agent: {verb: check, spawn_endpoint: \"ftp://x/y\"}", 6, "spawn_endpoint \"ftp://x/y\" must be an http(s) URL"},
		{"registry agent endpoint with user", "agent: researcher", "agent: {verb: check, spawn_endpoint: \"https://u:p@x/y\"}", 6, "no user info"},
		{"registry agent as a list", "agent: researcher", "agent: [check]", 6, "agent must be a single value, not a list"},
		{"max_spawns out of range", "    start: a\n", "    start: a\n    max_spawns: 6\n", 4, "max_spawns must be between 0 and 5, not 6"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := c.new
			if c.old != "" {
				src = vary(t, c.old, c.new)
			}
			set, err := Parse([]byte(src), testAgents)
			if err == nil {
				t.Fatalf("Parse succeeded, want a problem at line %d containing %q\n%s", c.line, c.msg, src)
			}
			if set != nil {
				t.Error("Parse returned a Set together with problems")
			}
			var probs Problems
			if !errors.As(err, &probs) {
				t.Fatalf("error is %T, not Problems: %v", err, err)
			}
			if len(probs) != 1 {
				t.Errorf("got %d problems, want 1:\n%v", len(probs), err)
			}
			found := false
			for _, p := range probs {
				if p.Line == c.line && strings.Contains(p.Msg, c.msg) {
					found = true
				}
			}
			if !found {
				t.Errorf("no problem at line %d containing %q; got:\n%v", c.line, c.msg, err)
			}
		})
	}
}

// reserved is a valid file but for the name of its second node.
func reserved(name string) string {
	return "workflows:\n  w:\n    start: a\n    nodes:\n      a: {agent: researcher, input: go}\n      " +
		name + ": {agent: researcher, input: go}\n    edges:\n      - {from: a, to: " + name + "}\n"
}

func TestParseReportsEveryProblem(t *testing.T) {
	_, err := Parse(readTestdata(t, "three-problems.yaml"), testAgents)
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("err = %v, want Problems", err)
	}
	want := []struct {
		line int
		msg  string
	}{
		{4, "max_steps must be between 1 and 1000, not 0"},
		{7, `agent "ghost" does not exist`},
		{9, `unknown key "colour"`},
	}
	if len(probs) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(probs), len(want), err)
	}
	lines := strings.Split(err.Error(), "\n")
	for i, w := range want {
		if probs[i].Line != w.line || !strings.Contains(probs[i].Msg, w.msg) {
			t.Errorf("problem %d = %+v, want line %d containing %q", i, probs[i], w.line, w.msg)
		}
		if prefix := "line " + strconv.Itoa(w.line) + ": "; !strings.HasPrefix(lines[i], prefix) {
			t.Errorf("Error() line %d = %q, want prefix %q", i, lines[i], prefix)
		}
	}
}

func TestProblemsError(t *testing.T) {
	p := Problems{{Line: 9, Msg: "c"}, {Line: 0, Msg: "general"}, {Line: 2, Msg: "a"}, {Line: 9, Msg: "d"}}
	want := "general\nline 2: a\nline 9: c\nline 9: d"
	if got := p.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if p[0].Line != 9 {
		t.Error("Error() reordered the receiver")
	}
}

func TestParseNilAgents(t *testing.T) {
	_, err := Parse([]byte(base), nil)
	if err == nil || !strings.Contains(err.Error(), `agent "researcher" does not exist`) {
		t.Errorf("Parse with nil AgentInfo = %v, want unknown-agent problems", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()

	set, err := Load(filepath.Join(dir, "workflows.yaml"), testAgents)
	if err != nil || set == nil || len(set.Workflows) != 0 {
		t.Errorf("Load(missing) = %v, %v; want an empty set", set, err)
	}

	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, readTestdata(t, "example.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	if set, err := Load(good, testAgents); err != nil || set.Get("find-ceo-email") == nil {
		t.Errorf("Load(good) = %v, %v", set, err)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, readTestdata(t, "three-problems.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad, testAgents)
	var probs Problems
	if !errors.As(err, &probs) || len(probs) != 3 {
		t.Errorf("Load(bad) = %v, want 3 Problems", err)
	}
	if err != nil && !strings.Contains(err.Error(), bad) {
		t.Errorf("Load(bad) error %q does not name the file", err)
	}

	if _, err := Load(dir, testAgents); err == nil {
		t.Error("Load(directory) succeeded")
	}
}

// step_limit is kept as written, with its line, for the config loader to
// read as a rate; a value that is not a string is a problem on its line.
func TestParseStepLimit(t *testing.T) {
	set, err := Parse([]byte("step_limit: 50/hour\nworkflows: {}\n"), testAgents)
	if err != nil {
		t.Fatal(err)
	}
	if set.StepLimit.Text != "50/hour" || set.StepLimit.Line != 1 {
		t.Errorf("step_limit = %+v, want 50/hour on line 1", set.StepLimit)
	}
	if n, p := set.CallerSteps(); n != DefaultStepLimitN || p != DefaultStepLimitPeriod {
		t.Errorf("before the loader reads it: %d/%s, want the default", n, p)
	}
	if n, p := (*Set)(nil).CallerSteps(); n != DefaultStepLimitN || p != DefaultStepLimitPeriod {
		t.Errorf("no file: %d/%s, want the default", n, p)
	}
	_, err = Parse([]byte("workflows: {}\nstep_limit: [5]\n"), testAgents)
	var probs Problems
	if !errors.As(err, &probs) || len(probs) != 1 || probs[0].Line != 2 || !strings.Contains(probs[0].Msg, "step_limit") {
		t.Errorf("a list as step_limit: %v, want one problem on line 2", err)
	}
}

// TestParseRegistryAgent: seed 001 Appendix D's node names no agent but
// what the registry is asked for; the fixed form is unchanged beside it.
func TestParseRegistryAgent(t *testing.T) {
	src := vary(t, "        agent: email-validator\n", `        agent:
          verb: check
          inputs: [nationality, destination]
          output_type: visa_required
          spawn_endpoint: https://agents.example/visa
`)
	src = strings.Replace(src, "    start: a\n", "    start: a\n    max_spawns: 2\n", 1)
	set, err := Parse([]byte(src), testAgents)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	w := set.Get("w")
	if w.MaxSpawns != 2 {
		t.Errorf("MaxSpawns = %d, want 2", w.MaxSpawns)
	}
	if a := w.Nodes["a"]; a.Agent != "researcher" || a.Pick != nil {
		t.Errorf("node a: agent %q pick %v, want the fixed researcher", a.Agent, a.Pick)
	}
	b := w.Nodes["b"]
	want := Pick{Verb: "check", Inputs: []string{"nationality", "destination"}, OutputType: "visa_required", SpawnEndpoint: "https://agents.example/visa"}
	if b.Agent != "" || b.Pick == nil || b.Pick.Verb != want.Verb || b.Pick.OutputType != want.OutputType ||
		!slices.Equal(b.Pick.Inputs, want.Inputs) || b.Pick.SpawnEndpoint != want.SpawnEndpoint {
		t.Fatalf("node b: agent %q pick %+v, want %+v", b.Agent, b.Pick, want)
	}
	if !strings.Contains(w.Mermaid(), `b["b (registry: verb check)"]`) {
		t.Errorf("Mermaid does not say what the registry is asked:\n%s", w.Mermaid())
	}
	text, err := Parse([]byte(vary(t, "        agent: email-validator\n", "        agent: {text: \"check visa rules\"}\n")), testAgents)
	if err != nil {
		t.Fatalf("Parse text form: %v", err)
	}
	if p := text.Get("w").Nodes["b"].Pick; p == nil || p.Text != "check visa rules" || text.Get("w").MaxSpawns != 1 {
		t.Errorf("text form: pick %+v, max_spawns %d; want the text and the default 1", p, text.Get("w").MaxSpawns)
	}
}
