package definition

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// drawSrc has a condition with quotes, one with "<", an unconditional edge,
// a back edge, a self loop and an edge that skips a level.
const drawSrc = `workflows:
  w:
    start: research
    nodes:
      research: {agent: researcher, input: "{{input.company}}"}
      validate: {agent: email-validator, input: "{{research.data}}"}
    edges:
      - {from: research, to: validate, when: 'response.status == "success"'}
      - {from: research, to: failed, when: 'response.status == "failure"'}
      - {from: validate, to: research, when: 'response.data.score < 0.5'}
      - {from: validate, to: validate, when: 'response.status == "retry"'}
      - {from: validate, to: end}
`

func drawWorkflow(t *testing.T) *Workflow {
	t.Helper()
	set, err := Parse([]byte(drawSrc), testAgents)
	if err != nil {
		t.Fatal(err)
	}
	return set.Get("w")
}

func TestMermaid(t *testing.T) {
	want := `flowchart TD
  research["research (researcher)"]
  validate["validate (email-validator)"]
  End(("end"))
  Failed(("failed"))
  research -->|"response.status == #quot;success#quot;"| validate
  research -->|"response.status == #quot;failure#quot;"| Failed
  validate -->|"response.data.score #lt; 0.5"| research
  validate -->|"response.status == #quot;retry#quot;"| validate
  validate --> End
`
	// Parsing again and drawing again must give the same text: the
	// output follows declaration order, never map order.
	for range 3 {
		if got := drawWorkflow(t).Mermaid(); got != want {
			t.Fatalf("Mermaid() =\n%s\nwant\n%s", got, want)
		}
	}
}

func TestMermaidEscaping(t *testing.T) {
	cases := []struct{ in, want string }{
		{`a "b"`, "a #quot;b#quot;"},
		{"x # comment", "x #35; comment"},
		{"#quot;", "#35;quot;"},
		{"a < b > c", "a #lt; b #gt; c"},
		{"line1\nline2", "line1 line2"},
	}
	for _, c := range cases {
		if got := mermaidText(c.in); got != c.want {
			t.Errorf("mermaidText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	ids := []struct{ in, want string }{
		{"research", "research"}, {End, "End"}, {Failed, "Failed"}, {"style", "Style"}, {"class", "Class"},
	}
	for _, c := range ids {
		if got := mermaidID(c.in); got != c.want {
			t.Errorf("mermaidID(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// svgInfo is what the SVG tests read back from a drawing with encoding/xml.
type svgInfo struct {
	current []string        // data-node of the groups holding a class="current" rect
	taken   map[string]bool // "from>to" of the groups holding a class="taken" path
	texts   []string
	nodes   map[string]bool // data-node of every node group
}

func readSVG(t *testing.T, doc []byte) svgInfo {
	t.Helper()
	info := svgInfo{taken: map[string]bool{}, nodes: map[string]bool{}}
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var stack []xml.StartElement
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			parent := xml.StartElement{}
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			stack = append(stack, tok)
			if tok.Name.Local == "g" && attr(tok, "data-node") != "" {
				info.nodes[attr(tok, "data-node")] = true
			}
			switch {
			case tok.Name.Local == "rect" && attr(tok, "class") == "current":
				info.current = append(info.current, attr(parent, "data-node"))
			case tok.Name.Local == "path" && attr(tok, "class") == "taken":
				info.taken[attr(parent, "data-from")+">"+attr(parent, "data-to")] = true
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 && stack[len(stack)-1].Name.Local == "text" {
				info.texts = append(info.texts, string(tok))
			}
		}
	}
	return info
}

func attr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func TestSVG(t *testing.T) {
	w := drawWorkflow(t)
	cases := []struct {
		name    string
		path    []string
		current string
		taken   []string
	}{
		{"running", []string{"research", "validate"}, "validate", []string{"research>validate"}},
		{"looped and done", []string{"research", "validate", "research", "validate", "end"}, "end",
			[]string{"research>validate", "validate>research", "validate>end"}},
		{"failed at once", []string{"research", "failed"}, "failed", []string{"research>failed"}},
		{"not started", nil, "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := w.SVG(c.path, c.current)
			s := string(doc)
			for _, bad := range []string{"<script", "href", "foreignObject", "url("} {
				if strings.Contains(s, bad) {
					t.Errorf("SVG contains %q", bad)
				}
			}
			if !strings.HasPrefix(s, "<?xml") || !strings.Contains(s, `<svg xmlns="http://www.w3.org/2000/svg"`) {
				t.Error("SVG is not a standalone document")
			}
			info := readSVG(t, doc)
			if c.current == "" {
				if len(info.current) != 0 {
					t.Errorf("class=current on %v, want none", info.current)
				}
			} else if len(info.current) != 1 || info.current[0] != c.current {
				t.Errorf("class=current on %v, want [%s]", info.current, c.current)
			}
			if len(info.taken) != len(c.taken) {
				t.Errorf("taken edges %v, want %v", info.taken, c.taken)
			}
			for _, e := range c.taken {
				if !info.taken[e] {
					t.Errorf("edge %s is not class=taken (taken: %v)", e, info.taken)
				}
			}
			for _, n := range []string{"research", "validate", "end", "failed"} {
				if !info.nodes[n] {
					t.Errorf("node %s is not drawn", n)
				}
			}
			if !strings.Contains(s, "response.data.score &lt; 0.5") || strings.Contains(s, "score < 0.5") {
				t.Error("the condition with < is not escaped")
			}
			if !strings.Contains(s, `response.status == &#34;success&#34;`) {
				t.Error("the condition with quotes is not drawn escaped")
			}
			if !bytes.Equal(doc, w.SVG(c.path, c.current)) {
				t.Error("SVG is not deterministic")
			}
		})
	}
}

// TestSVGHostileNames draws a hand-built workflow whose names and agent
// contain XML syntax: the document must stay well-formed and carry the text.
func TestSVGHostileNames(t *testing.T) {
	cond, err := CompileCondition(`response.x == "</text><script>alert(1)</script>" # & ]]>`)
	if err != nil {
		t.Fatal(err)
	}
	w := &Workflow{
		Name:      `w"><script>`,
		Start:     `a<b`,
		NodeOrder: []string{`a<b`, `c&d`, "orphan"},
		Nodes: map[string]*Node{
			`a<b`:    {Name: `a<b`, Agent: `"quoted" & <agent>`},
			`c&d`:    {Name: `c&d`, Agent: "x\x01y"},
			"orphan": {Name: "orphan", Agent: "z"},
		},
		Edges: []*Edge{
			{From: `a<b`, To: `c&d`, When: cond},
			{From: `c&d`, To: Failed},
			{From: `c&d`, To: "nowhere"},
		},
	}
	doc := w.SVG([]string{`a<b`, `c&d`}, `c&d`)
	if bytes.Contains(doc, []byte("<script")) {
		t.Errorf("SVG contains a script element:\n%s", doc)
	}
	info := readSVG(t, doc)
	if len(info.current) != 1 || info.current[0] != `c&d` {
		t.Errorf("current = %v", info.current)
	}
	if !info.taken[`a<b>c&d`] {
		t.Errorf("taken = %v", info.taken)
	}
	joined := strings.Join(info.texts, "|")
	for _, want := range []string{`a<b`, `"quoted" & <agent>`, "orphan"} {
		if !strings.Contains(joined, want) {
			t.Errorf("texts %q do not contain %q", joined, want)
		}
	}
	// Mermaid must not break out of its quoted labels either.
	if m := w.Mermaid(); strings.Count(m, `"`)%2 != 0 || strings.Contains(m, `"quoted"`) {
		t.Errorf("Mermaid labels are not escaped:\n%s", m)
	}
}

func TestSVGEmptyWorkflow(t *testing.T) {
	readSVG(t, (&Workflow{Name: "empty"}).SVG(nil, ""))
}
