package approval

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sacpgw/gateway/sacp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Content templates: a JSON Schema per target type, in the catalogue's
// templates/ directory (templates/design.json, templates/code.json…). The
// gateway checks a change's content against its target type's template
// before the policy runs and passes the result as input.content_check; the
// shipped policy turns a mismatch into the violation content.template.

// templatesDir is the catalogue's subdirectory of content templates.
const templatesDir = "templates"

// maxTemplate bounds one template file: it is compiled into memory.
const maxTemplate = 1 << 20

// maxTemplateErrors caps the errors reported for one content: they go into
// the policy input, the response and the audit trail.
const maxTemplateErrors = 20

// templateURL is the name a template is compiled under. It is a name, never
// fetched (refusingLoader).
const templateURL = "gateway:///templates/"

// Template is a compiled content template. It is immutable, so safe for
// concurrent use.
type Template struct {
	// Name is the file relative to the catalogue ("templates/design.json"),
	// for messages.
	Name   string
	schema *jsonschema.Schema
}

// loadTemplates compiles every <target_type>.json in dir; a missing dir is
// no templates. Each is compiled once, here, so a bad template is a load
// error (the last good catalogue keeps serving) and a check compiles
// nothing. A file named after no target type is refused: a typo
// ("desing.json") would otherwise leave a type silently unchecked.
func loadTemplates(dir string) (map[string]*Template, error) {
	out := map[string]*Template{}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("content templates: %w", err)
	}
	var problems []error
	for _, e := range entries {
		name := e.Name()
		// Hidden names are skipped, as in the catalogue (ConfigMap mounts).
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		typ, ok := strings.CutSuffix(name, ".json")
		if e.IsDir() || !ok || !contains(targetTypes, typ) {
			problems = append(problems, fmt.Errorf("%s: want one file <target_type>.json per target type (%s)", path, strings.Join(targetTypes, ", ")))
			continue
		}
		t, err := compileTemplate(path, templatesDir+"/"+name)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		out[typ] = t
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return out, nil
}

func compileTemplate(path, name string) (*Template, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("content template: %w", err)
	}
	if fi.Size() > maxTemplate {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxTemplate)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("content template: %w", err)
	}
	return NewTemplate(b, name)
}

// NewTemplate compiles a content template. Like the SACP data schemas
// (sacp.CompileSelfContained) it must be self-contained: a $ref to a file or URL is
// refused, so what was checked at load is exactly what runs and a template
// cannot make the gateway read files or the network; and "format" is
// asserted, since a template is a contract on content.
func NewTemplate(schema []byte, name string) (*Template, error) {
	sch, err := sacp.CompileSelfContained(schema, templateURL+name, "content template", name)
	if err != nil {
		return nil, err
	}
	return &Template{Name: name, schema: sch}, nil
}

// Check validates content and returns what is wrong with it, one entry per
// failed keyword ("/title: missing property…"), sorted, at most
// maxTemplateErrors and a count of the rest; none when it matches.
//
// What is validated: content that is one JSON value (an object, an array,
// a number…) is validated as that value, so a template can describe a
// structured document; any other content is validated as a JSON string, so
// a template for prose (Markdown designs, code) can constrain it with
// "type": "string", "pattern", "minLength"….
func (t *Template) Check(content string) []string {
	var inst any = content
	if json.Valid([]byte(content)) {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
		if err == nil {
			inst = v
		}
	}
	err := t.schema.Validate(inst)
	if err == nil {
		return nil
	}
	ve, ok := errors.AsType[*jsonschema.ValidationError](err)
	if !ok {
		return []string{"/: " + err.Error()}
	}
	var leaves []string
	templateLeaves(ve.DetailedOutput(), &leaves)
	// The validator walks maps, so the order of causes is random; sorting
	// makes the input, and so the decision and its audit entry,
	// reproducible.
	slices.Sort(leaves)
	leaves = slices.Compact(leaves)
	if len(leaves) == 0 {
		leaves = []string{"/: " + err.Error()}
	}
	if len(leaves) > maxTemplateErrors {
		leaves = append(leaves[:maxTemplateErrors:maxTemplateErrors], fmt.Sprintf("... and %d more errors", len(leaves)-maxTemplateErrors))
	}
	return leaves
}

// templateLeaves flattens the detailed output to the failed keywords
// themselves, not the groups around them ("allOf failed").
func templateLeaves(u *jsonschema.OutputUnit, out *[]string) {
	if len(u.Errors) == 0 {
		if u.Error != nil {
			loc := u.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			*out = append(*out, loc+": "+u.Error.String())
		}
		return
	}
	for i := range u.Errors {
		templateLeaves(&u.Errors[i], out)
	}
}
