package approval

import (
	"errors"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/workflow/definition"
)

// graphWorkflowSrc is a small workflow with the shapes the drawing has: a
// condition with quotes, one with "<", an unconditional edge, a back edge
// and a self loop.
const graphWorkflowSrc = `workflows:
  find-ceo:
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

// gatewayWorkflow is graphWorkflowSrc's workflow.
func gatewayWorkflow(t testing.TB) *definition.Workflow {
	t.Helper()
	set, err := definition.Parse([]byte(graphWorkflowSrc), func(id string) (bool, bool) {
		return id == "researcher" || id == "email-validator", true
	})
	if err != nil {
		t.Fatal(err)
	}
	wf := set.Get("find-ceo")
	if wf == nil {
		t.Fatal("no workflow find-ceo")
	}
	return wf
}

// gatewayGraph is the gateway's own drawing of graphWorkflowSrc, with the
// run at validate after research.
func gatewayGraph(t testing.TB) string {
	t.Helper()
	return string(gatewayWorkflow(t).SVG([]string{"research", "validate"}, "validate"))
}

func TestCheckGraph(t *testing.T) {
	good := gatewayGraph(t)
	// body is the drawing without its XML declaration and <svg ...> tag,
	// to build variants of it.
	open := strings.Index(good, "<svg")
	head := good[:open]
	svgTag := good[open : open+strings.Index(good[open:], ">")+1]
	body := good[open+len(svgTag):]
	inject := func(markup string) string { // before the closing </svg>
		i := strings.LastIndex(good, "</svg>")
		return good[:i] + markup + good[i:]
	}
	withAttr := func(attr string) string { // on the first <rect
		return strings.Replace(good, "<rect ", "<rect "+attr+" ", 1)
	}
	cases := []struct {
		name string
		doc  string
		ok   bool
	}{
		{"the gateway's drawing", good, true},
		{"the gateway's drawing without XML declaration", strings.TrimPrefix(good, head), true},
		{"surrounding whitespace", "\n  " + good + "\n\n", true},
		{"minimal", `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect x="0" y="0" width="1" height="1"/></svg>`, true},
		{"text mentioning on and href", inject(`<text x="1" y="1">turn on the href check</text>`), true},

		{"empty", "", false},
		{"not svg", "<html><body>x</body></html>", false},
		{"text before svg", "hello " + good, false},
		{"svg-like tag", "<svgx>" + body, false},
		{"html document", "<!doctype html><svg></svg>", false},
		{"script element", inject(`<script>alert(1)</script>`), false},
		{"script element in capitals", inject(`<SCRIPT>alert(1)</SCRIPT>`), false},
		{"svg script with namespace prefix", inject(`<svg:script xmlns:svg="http://www.w3.org/2000/svg">alert(1)</svg:script>`), false},
		{"onload on the root", strings.Replace(good, "<svg ", `<svg onload="alert(1)" `, 1), false},
		{"onload in capitals", strings.Replace(good, "<svg ", `<svg ONLOAD="alert(1)" `, 1), false},
		{"onLoad in mixed case", strings.Replace(good, "<svg ", `<svg onLoad="alert(1)" `, 1), false},
		{"onclick on a shape", withAttr(`onclick="alert(1)"`), false},
		{"onmouseover with spaces", withAttr(`onmouseover = "alert(1)"`), false},
		{"onerror after a slash", strings.Replace(good, "<svg ", `<svg/onerror="alert(1)" `, 1), false},
		{"foreignObject", inject(`<foreignObject width="10" height="10"><div xmlns="http://www.w3.org/1999/xhtml">x</div></foreignObject>`), false},
		{"foreignobject in lower case", inject(`<foreignobject width="10" height="10"></foreignobject>`), false},
		{"href", inject(`<a href="https://evil.example/">x</a>`), false},
		{"xlink:href", inject(`<use xmlns:xlink="http://www.w3.org/1999/xlink" xlink:href="#x"/>`), false},
		{"HREF in capitals on an image", inject(`<image HREF="https://evil.example/x.png"/>`), false},
		{"javascript: in a title", inject(`<title>javascript:alert(1)</title>`), false},
		{"JavaScript: in a data attribute", withAttr(`data-x="JavaScript:alert(1)"`), false},
		{"javascript: in text", inject(`<text x="1" y="1">see javascript:void(0)</text>`), false},
		{"style element", inject(`<style>body{display:none}</style>`), false},
		{"style attribute", withAttr(`style="position:fixed;top:0"`), false},
		{"unknown element", inject(`<animate attributeName="x" to="1"/>`), false},
		{"html element breaking out", inject(`<img src="x"/>`), false},
		{"element inside a title", inject(`<title><rect/></title>`), false},
		{"comment", inject(`<!-- x -->`), false},
		{"CDATA", inject(`<text x="1" y="1"><![CDATA[<img src=x>]]></text>`), false},
		{"processing instruction", inject(`<?xml-stylesheet type="text/css" href="x.css"?>`), false},
		{"two roots", good + `<svg xmlns="http://www.w3.org/2000/svg"></svg>`, false},
		{"markup after the root", good + `<p>x</p>`, false},
		{"unclosed", strings.TrimSuffix(strings.TrimSpace(good), "</svg>"), false},
		{"other default namespace", strings.Replace(good, `xmlns="http://www.w3.org/2000/svg"`, `xmlns="http://www.w3.org/1999/xhtml"`, 1), false},
		{"xml:base", strings.Replace(good, "<svg ", `<svg xml:base="https://evil.example/" `, 1), false},
		{"too large", inject(`<text x="1" y="1">` + strings.Repeat("a", maxGraph) + `</text>`), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := checkGraph(c.doc)
			if c.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !strings.HasPrefix(got, "<svg") || strings.Contains(got, "<?xml") {
					t.Fatalf("markup to embed starts %.40q", got)
				}
				h, err := graphHTML(c.doc)
				if err != nil || string(h) != got {
					t.Fatalf("graphHTML: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted:\n%s", c.doc)
			}
			t.Logf("refused: %v", err)
			if !errors.Is(err, errGraph) {
				t.Fatalf("error %v is not errGraph", err)
			}
			if h, err := graphHTML(c.doc); h != "" || err == nil {
				t.Fatalf("graphHTML gave %q, %v", h, err)
			}
		})
	}

	// The drawing has what the review page relies on.
	for _, want := range []string{`class="current"`, `class="taken"`, "<title>workflow find-ceo</title>"} {
		if !strings.Contains(good, want) {
			t.Errorf("the gateway's drawing has no %s", want)
		}
	}
}

// The XML check alone (without the raw text checks in front of it) refuses
// what the raw checks look for too.
func TestCheckGraphXML(t *testing.T) {
	const ns = `xmlns="http://www.w3.org/2000/svg"`
	for _, doc := range []string{
		`<svg ` + ns + ` onload="x"></svg>`,
		`<svg ` + ns + `><rect OnClick="x"/></svg>`,
		`<svg ` + ns + `><rect href="#a"/></svg>`,
		`<svg ` + ns + ` xmlns:xlink="http://www.w3.org/1999/xlink"><rect xlink:href="#a"/></svg>`,
		`<svg ` + ns + `><script>x</script></svg>`,
		`<svg ` + ns + `><foreignObject/></svg>`,
		`<svg ` + ns + `><rect style="x"/></svg>`,
		`<rect ` + ns + `/>`,
	} {
		if err := checkGraphXML(doc); err == nil {
			t.Errorf("accepted %s", doc)
		}
	}
	if err := checkGraphXML(`<svg ` + ns + `><g data-node="a"><title>a</title><rect class="current" x="1"/></g></svg>`); err != nil {
		t.Errorf("refused a plain drawing: %v", err)
	}
}

func TestParseWorkflowContent(t *testing.T) {
	content := `{"run_id":"run-1","workflow":"find-ceo","node":"validate","agent":"email-validator",` +
		`"question":"Which address?","answer":{"status":"needs_human","data":{"a":1}},"path":["research","validate"],` +
		`"context":{"status":"WAITING_FOR_HUMAN","entities":{"vendor":{"name":"ACME <Corp>"}}},"graph":"flowchart TD"}`
	w := parseWorkflowContent(content)
	if w == nil {
		t.Fatal("not read")
	}
	if w.RunID != "run-1" || w.Workflow != "find-ceo" || w.Node != "validate" || w.Agent != "email-validator" ||
		w.Question != "Which address?" || strings.Join(w.Path, ",") != "research,validate" {
		t.Fatalf("%+v", w)
	}
	if want := "{\n  \"vendor\": {\n    \"name\": \"ACME <Corp>\"\n  }\n}"; w.Entities != want {
		t.Errorf("entities %q, want %q", w.Entities, want)
	}
	if !strings.Contains(w.Answer, "\"status\": \"needs_human\"") {
		t.Errorf("answer %q", w.Answer)
	}
	for _, bad := range []string{"", "not json", `{"workflow":"x"}`, `[1,2]`} {
		if w := parseWorkflowContent(bad); w != nil {
			t.Errorf("%q read as %+v", bad, w)
		}
	}
	if w := parseWorkflowContent(`{"run_id":"r","context":{"entities":null}}`); w == nil || w.Entities != "" || w.Answer != "" {
		t.Errorf("null entities: %+v", w)
	}
}
