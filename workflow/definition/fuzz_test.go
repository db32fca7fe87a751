package definition

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that no file makes Parse panic, and that a file Parse
// accepts describes a closed graph: the start is a node and every edge joins
// nodes or ends in End/Failed. The seed corpus is testdata/*.yaml.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	if len(files) == 0 {
		f.Fatal("no seed files in testdata")
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(base))
	f.Add([]byte(drawSrc))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Parse(data, testAgents)
		if err != nil {
			if set != nil {
				t.Fatal("Parse returned a Set together with an error")
			}
			_ = err.Error()
			return
		}
		for name, w := range set.Workflows {
			if w.Name != name {
				t.Fatalf("workflow %q has Name %q", name, w.Name)
			}
			if _, ok := w.Nodes[w.Start]; !ok {
				t.Fatalf("workflow %q: start %q is not a node", name, w.Start)
			}
			if len(w.NodeOrder) != len(w.Nodes) {
				t.Fatalf("workflow %q: NodeOrder %v does not match Nodes", name, w.NodeOrder)
			}
			for _, n := range w.NodeOrder {
				if node := w.Nodes[n]; node == nil || node.Input == nil || node.Agent == "" {
					t.Fatalf("workflow %q: node %q is incomplete: %+v", name, n, node)
				}
			}
			for _, e := range w.Edges {
				if _, ok := w.Nodes[e.From]; !ok {
					t.Fatalf("workflow %q: edge from %q, not a node", name, e.From)
				}
				if _, ok := w.Nodes[e.To]; !ok && e.To != End && e.To != Failed {
					t.Fatalf("workflow %q: edge to %q, not a node nor End/Failed", name, e.To)
				}
			}
			if w.MaxSteps < 1 || w.MaxSteps > 1000 || w.MaxNegotiationRounds < 0 || w.MaxNegotiationRounds > 10 {
				t.Fatalf("workflow %q: limits out of range: %d/%d", name, w.MaxSteps, w.MaxNegotiationRounds)
			}
			// The drawings must not panic on anything Parse accepts.
			_ = w.Mermaid()
			_ = w.SVG(w.NodeOrder, w.Start)
		}
	})
}

// FuzzTemplate checks that ParseTemplate never panics and that a template
// it accepts renders against an empty root without panicking (an error is
// expected whenever the template has a placeholder).
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		"",
		"plain",
		"Find the e-mail of the CEO of {{input.company}}.",
		"Validate these addresses: {{research.data.guesses}}",
		"{{ research.data.guesses.0 }} and {{blob research.data.file}}",
		"{{input.a",
		"{{}}",
		"{{upper x}}",
		"}}{{{{a}}}}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTemplate(s)
		if err != nil {
			return
		}
		if tm.String() != s {
			t.Fatalf("String() = %q, want %q", tm.String(), s)
		}
		out, err := tm.Render(map[string]any{}, nil)
		if err == nil && len(tm.parts) > 0 {
			for _, p := range tm.parts {
				if p.path != nil {
					t.Fatalf("Render(%q) against an empty root = %q, want an error", s, out)
				}
			}
		}
		_ = tm.Nodes()
	})
}
