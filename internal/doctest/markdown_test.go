package doctest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// block is one fenced code block of a Markdown file, with its annotation.
type block struct {
	file string // slash path from the repository root: "docs/approval.md"
	line int    // 1-based line of the opening fence
	lang string // normalised language: sh, json, yaml, rego, text, ...
	kind string // the annotation's kind: run, skip, response, file, config, rego-fragment; "" for none
	arg  string // the rest of the annotation: a reason, a path, options
	text string // the content, without the fences and the fence's indentation
}

func (b block) where() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var (
	// A fence may be indented (a block inside a list item): the content
	// loses that indentation, as Markdown renders it.
	fenceRE = regexp.MustCompile("^( *)(`{3,}|~{3,})[ \t]*([^ \t`]*)")
	// The annotation is one line: <!-- doctest: KIND ARGS -->.
	annotationRE = regexp.MustCompile(`^\s*<!--\s*doctest:\s*(.*?)\s*-->\s*$`)
)

// langs maps the info strings used in the docs to one name per checker.
var langs = map[string]string{
	"": "text", "text": "text", "txt": "text",
	"sh": "sh", "bash": "sh", "shell": "sh", "console": "sh",
	"json": "json", "yaml": "yaml", "yml": "yaml", "rego": "rego",
	"python": "python", "py": "python", "js": "js", "javascript": "js", "go": "go",
}

// parseBlocks returns the fenced blocks of one Markdown file. An annotation
// that does not stand right before a fence, and a fence never closed, are
// errors: both mean a check that silently does not happen.
func parseBlocks(file, src string) ([]block, []error) {
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	var blocks []block
	var errs []error
	for i := 0; i < len(lines); i++ {
		if annotationRE.MatchString(lines[i]) && (i+1 >= len(lines) || !fenceRE.MatchString(lines[i+1])) {
			errs = append(errs, fmt.Errorf("%s:%d: a doctest annotation must be on the line right before a fence", file, i+1))
			continue
		}
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, fence, info := len(m[1]), m[2], strings.ToLower(m[3])
		b := block{file: file, line: i + 1, lang: langs[info]}
		if b.lang == "" {
			b.lang = info // mermaid, markdown, http, ...: listed, not checked
		}
		if i > 0 {
			if a := annotationRE.FindStringSubmatch(lines[i-1]); a != nil {
				b.kind, b.arg, _ = strings.Cut(a[1], " ")
				b.arg = strings.TrimSpace(b.arg)
			}
		}
		closed := false
		var body []string
		for i++; i < len(lines); i++ {
			l := lines[i]
			if t := strings.TrimLeft(l, " "); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]+" \t") == "" {
				closed = true
				break
			}
			// Remove up to the fence's indentation, no more.
			n := 0
			for n < indent && n < len(l) && l[n] == ' ' {
				n++
			}
			body = append(body, l[n:])
		}
		if !closed {
			errs = append(errs, fmt.Errorf("%s: the fence is never closed", b.where()))
			break
		}
		b.text = strings.Join(body, "\n")
		if len(body) > 0 {
			b.text += "\n"
		}
		blocks = append(blocks, b)
	}
	return blocks, errs
}

func TestParseBlocks(t *testing.T) {
	src := "# T\n\n" +
		"<!-- doctest: run status=422 -->\n" +
		"```sh\ncurl -s localhost:8080/x\n```\n\n" +
		"1. a step\n\n" +
		"   ```json\n   {\"a\": 1}\n    {\"b\": 2}\n   ```\n\n" +
		"<!-- doctest: skip needs a Kubernetes cluster -->\n" +
		"~~~~bash\nkubectl apply -f x\n```\n~~~~\n" +
		"```\nplain\n```\n"
	blocks, errs := parseBlocks("x.md", src)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := []block{
		{file: "x.md", line: 4, lang: "sh", kind: "run", arg: "status=422", text: "curl -s localhost:8080/x\n"},
		{file: "x.md", line: 10, lang: "json", text: "{\"a\": 1}\n {\"b\": 2}\n"},
		{file: "x.md", line: 16, lang: "sh", kind: "skip", arg: "needs a Kubernetes cluster", text: "kubectl apply -f x\n```\n"},
		{file: "x.md", line: 20, lang: "text", text: "plain\n"},
	}
	if fmt.Sprint(blocks) != fmt.Sprint(want) {
		t.Errorf("blocks:\n%v\nwant:\n%v", blocks, want)
	}

	_, errs = parseBlocks("y.md", "<!-- doctest: run -->\n\n```sh\ntrue\n```\n```sh\nopen\n")
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "y.md:1: a doctest annotation must be on the line right before a fence") ||
		!strings.Contains(errs[1].Error(), "y.md:6: the fence is never closed") {
		t.Errorf("errors: %v", errs)
	}
}
