package approval

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"html/template"
	"io"
	"regexp"
	"strings"
)

// The review page shows an escalation's Graph inline: an SVG document the
// gateway itself drew (workflow/definition's SVG), never one from an agent.
// It is embedded as trusted HTML for that reason only, so before it is,
// checkGraph makes sure it is still the kind of drawing the gateway makes:
// one <svg> element of plain shapes and text, with no scripts, no
// foreignObject, no event handler attributes, no links, no styles and no
// markup (comments, CDATA, processing instructions, DOCTYPE) that the XML
// and HTML parsers could read differently. Anything else is refused and
// the page shows a note instead.

// maxGraph bounds a drawing shown inline.
const maxGraph = 1 << 20

const svgNamespace = "http://www.w3.org/2000/svg"

// graphElements are the SVG elements a gateway drawing may use: shapes,
// groups and text. None of them runs script, loads anything or links
// anywhere.
var graphElements = map[string]bool{
	"svg": true, "g": true, "title": true, "desc": true,
	"rect": true, "path": true, "polygon": true, "polyline": true,
	"line": true, "circle": true, "ellipse": true, "text": true, "tspan": true,
}

// graphTextOnly are the elements whose content must be plain text. In HTML
// they are integration points (their content is parsed as HTML, not SVG).
var graphTextOnly = map[string]bool{"title": true, "desc": true}

// graphEventAttr and graphHrefAttr find event handler and link attributes
// in the raw text, whatever the case and prefix, independently of the XML
// parse below (defence in depth: either check alone refuses them).
var (
	graphEventAttr = regexp.MustCompile(`(?i)[\s"'/]on[a-z]+\s*=`)
	graphHrefAttr  = regexp.MustCompile(`(?i)[\s"'/](?:[a-z0-9_.-]+:)?href\s*=`)
)

// errGraph is a drawing that is not what the gateway draws.
var errGraph = errors.New("not a drawing of the gateway")

func graphRefused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errGraph, fmt.Sprintf(format, args...))
}

// checkGraph returns the markup of doc to embed in an HTML page (doc
// without its XML declaration) if doc is an SVG drawing of the kind the
// gateway makes, or an error saying why it is not.
func checkGraph(doc string) (string, error) {
	if len(doc) > maxGraph {
		return "", graphRefused("larger than %d bytes", maxGraph)
	}
	s := strings.TrimSpace(doc)
	// The gateway's drawing is a standalone document: its XML
	// declaration means nothing inside HTML and is dropped.
	if strings.HasPrefix(s, "<?xml ") || strings.HasPrefix(s, "<?xml\t") || strings.HasPrefix(s, "<?xml\n") {
		end := strings.Index(s, "?>")
		if end < 0 {
			return "", graphRefused("unterminated XML declaration")
		}
		s = strings.TrimSpace(s[end+2:])
	}
	if !strings.HasPrefix(s, "<svg") || len(s) < 5 || !strings.ContainsRune(" \t\r\n>/", rune(s[4])) {
		return "", graphRefused("does not start with <svg")
	}
	lower := strings.ToLower(s)
	for _, bad := range []struct{ text, why string }{
		{"<script", "a script element"},
		{"foreignobject", "a foreignObject element"},
		{"javascript:", "a javascript: URL"},
		{"<!", "a comment, CDATA section or DOCTYPE"},
		{"<?", "a processing instruction"},
	} {
		if strings.Contains(lower, bad.text) {
			return "", graphRefused("contains %s", bad.why)
		}
	}
	if graphEventAttr.MatchString(s) {
		return "", graphRefused("contains an event handler attribute")
	}
	if graphHrefAttr.MatchString(s) {
		return "", graphRefused("contains a link (href)")
	}
	if err := checkGraphXML(s); err != nil {
		return "", err
	}
	return s, nil
}

// checkGraphXML parses s as XML: a single <svg> root of graphElements, with
// attributes that are neither event handlers, links nor styles.
func checkGraphXML(s string) error {
	d := xml.NewDecoder(strings.NewReader(s))
	d.Strict = true
	var open []string
	roots := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return graphRefused("not well-formed XML: %v", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			if t.Name.Space != "" && t.Name.Space != svgNamespace {
				return graphRefused("element %s:%s outside the SVG namespace", t.Name.Space, name)
			}
			if !graphElements[name] {
				return graphRefused("element <%s>", name)
			}
			if len(open) == 0 {
				roots++
				if roots > 1 || name != "svg" {
					return graphRefused("more than the <svg> element")
				}
			} else if graphTextOnly[open[len(open)-1]] {
				return graphRefused("element <%s> inside <%s>", name, open[len(open)-1])
			}
			for _, a := range t.Attr {
				if err := checkGraphAttr(a); err != nil {
					return err
				}
			}
			open = append(open, name)
		case xml.EndElement:
			open = open[:len(open)-1] // the decoder checks that tags match
		case xml.CharData:
			if len(open) == 0 && len(bytes.TrimSpace(t)) > 0 {
				return graphRefused("text outside the <svg> element")
			}
		default: // comments, processing instructions, directives
			return graphRefused("markup other than elements and text")
		}
	}
	if roots != 1 || len(open) != 0 {
		return graphRefused("not one complete <svg> element")
	}
	return nil
}

func checkGraphAttr(a xml.Attr) error {
	local := strings.ToLower(a.Name.Local)
	switch {
	case a.Name.Space == "xmlns" || (a.Name.Space == "" && local == "xmlns"):
		if local == "xmlns" && a.Value != svgNamespace {
			return graphRefused("default namespace %q", a.Value)
		}
		return nil
	case a.Name.Space != "":
		// xlink:href, xml:base and the like.
		return graphRefused("attribute %s:%s", a.Name.Space, a.Name.Local)
	case strings.HasPrefix(local, "on"):
		return graphRefused("event handler attribute %s", a.Name.Local)
	case local == "href", local == "src", local == "style":
		return graphRefused("attribute %s", a.Name.Local)
	}
	return nil
}

// graphHTML returns the drawing to embed in the review page, or a note for
// the reviewer when it is refused. It is the only place the review page
// turns a string into trusted HTML.
func graphHTML(doc string) (template.HTML, error) {
	s, err := checkGraph(doc)
	if err != nil {
		return "", err
	}
	return template.HTML(s), nil // checked above: the gateway's own kind of drawing
}

// workflowReview is the content of a WORKFLOW_PAUSE escalation as the review
// page shows it: the question, where the run stands, and its Global
// Context entities and the agent's answer as indented JSON.
type workflowReview struct {
	RunID    string
	Workflow string
	Node     string
	Agent    string
	Question string
	Path     []string
	Entities string
	Answer   string
}

// parseWorkflowContent reads a WORKFLOW_PAUSE escalation's content (the
// workflow front door's JSON); nil when it is not that JSON, and the page
// shows the raw content only.
func parseWorkflowContent(content string) *workflowReview {
	var c struct {
		RunID    string          `json:"run_id"`
		Workflow string          `json:"workflow"`
		Node     string          `json:"node"`
		Agent    string          `json:"agent"`
		Question string          `json:"question"`
		Answer   json.RawMessage `json:"answer"`
		Path     []string        `json:"path"`
		Context  struct {
			Entities json.RawMessage `json:"entities"`
		} `json:"context"`
	}
	if err := json.Unmarshal([]byte(content), &c); err != nil || c.RunID == "" {
		return nil
	}
	return &workflowReview{RunID: c.RunID, Workflow: c.Workflow, Node: c.Node, Agent: c.Agent, Question: c.Question,
		Path: c.Path, Entities: indentJSON(c.Context.Entities), Answer: indentJSON(c.Answer)}
}

// indentJSON formats raw JSON for a <pre>; "" for none (absent or null).
func indentJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
