package sacp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The values of "status": the SACP answer's three, plus "completed", which
// the gateway accepts as well, and the two control statuses of workflows
// (docs/glossary.md, docs/workflows.md): retry_with_instruction talks back
// to the previous agent of a chain, WAITING_FOR_HUMAN asks for a person.
const (
	StatusSuccess              = "success"
	StatusFailure              = "failure"
	StatusClarificationNeeded  = "clarification_needed"
	StatusCompleted            = "completed"
	StatusRetryWithInstruction = "retry_with_instruction"
	StatusWaitingForHuman      = "WAITING_FOR_HUMAN"
)

var statuses = []string{StatusSuccess, StatusFailure, StatusClarificationNeeded, StatusCompleted, StatusRetryWithInstruction, StatusWaitingForHuman}

// StatusNeedsInput is the protocol's own name, in its description of
// workflow control flow (success, failure, needs_input), for what its answer
// format calls clarification_needed. An answer that uses it is read as
// clarification_needed, not refused: asking the model again (and paying for
// it) over a synonym the protocol itself uses would be the gateway's fault.
const StatusNeedsInput = "needs_input"

// maxErrors caps Outcome.Errors: a data payload with thousands of violations
// must not turn the re-ask prompt into a second payload. The model gets the
// first ones and a count of the rest.
const maxErrors = 20

// schemaURL is where the data schema is registered in the compiler. It is a
// name, never fetched: see refusingLoader.
const schemaURL = "sacp:///data-schema.json"

// Response is a SACP answer (its shape is in docs/glossary.md). Fields are in
// wire order.
type Response struct {
	Thought      string          `json:"thought"`
	Status       string          `json:"status"`
	Data         json.RawMessage `json:"data"`
	Message      string          `json:"message"`
	NextStepHint string          `json:"next_step_hint,omitempty"`
}

// Outcome is the result of Validator.Check.
type Outcome struct {
	// Valid reports that the answer is a complete SACP object whose data
	// matches the agent's schema.
	Valid bool
	// Response holds the fields that could be read. Only when Valid is it a
	// protocol answer; otherwise it is for logging (e.g. the status the model
	// claimed) and must not be served.
	Response Response
	// Errors lists, when not Valid, one problem per entry, each starting with
	// the JSON pointer at fault ("/status: ...", "/data/amount: ..."): the
	// envelope in field order, then the data schema's errors sorted. At most
	// maxErrors entries plus a final "... and N more errors". When no object
	// could be found it is the single entry "response is not a JSON object:
	// <reason>".
	Errors []string
	// StatusFrom is the status the answer wrote when the gateway read it
	// as another: "needs_input" read as clarification_needed. Empty when
	// the status was taken as written.
	StatusFrom string
}

// Validator checks answers against the SACP envelope and, optionally, an
// agent's JSON Schema for "data". It is immutable after NewValidator and safe
// for concurrent use. A nil *Validator checks the envelope only.
type Validator struct {
	schema *jsonschema.Schema // nil: "data" only has to be an object
}

// NewValidator compiles the data schema once, at load time, so a bad schema
// is a startup error and Check does no compilation. A nil or empty schema
// means no data schema. name identifies the schema in errors, typically the
// data_schema_file path.
//
// The schema must be self-contained: a $ref to another file or URL is
// refused, so that what `config check` compiled is exactly what runs and a
// schema cannot make the gateway read files or the network. "format" is
// asserted, not just annotated (the 2020-12 default), because a schema here is
// a contract on traffic: an author writing "format": "email" expects it to be
// enforced.
func NewValidator(schema []byte, name string) (*Validator, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return &Validator{}, nil
	}
	sch, err := CompileSelfContained(schema, schemaURL, "data schema", name)
	if err != nil {
		return nil, err
	}
	return &Validator{schema: sch}, nil
}

// CompileSelfContained compiles a JSON Schema that must stand alone, as
// every schema the gateway enforces on traffic does (SACP data schemas,
// approval content templates): a $ref to a file or URL is refused, so what
// was checked at load is exactly what runs and compiling cannot make the
// gateway read files or the network; and "format" is asserted, not only
// annotated, since the schema is a contract on content. url names the
// schema's resource; errors read "<what> <name>: …", and a refused $ref
// "<what>s must be self-contained".
func CompileSelfContained(schema []byte, url, what, name string) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, name, err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refusingLoader{what: what})
	c.AssertFormat()
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, name, err)
	}
	return sch, nil
}

// refusingLoader keeps schema compilation free of I/O (see
// CompileSelfContained).
type refusingLoader struct{ what string }

func (l refusingLoader) Load(string) (any, error) {
	return nil, errors.New(l.what + "s must be self-contained (no $ref to files or URLs)")
}

// Check sanitizes content (see Sanitize), parses it and validates it, the
// strict check of every answer of a json_standard agent: "thought", "status",
// "data" and "message" are required, "status" must be one of the four statuses,
// "data" must be an object that matches the schema, and "next_step_hint" is an
// optional string (null counts as absent, as models often write it for "no
// hint"). Other top-level keys are allowed but dropped: Response has only the
// protocol's fields, so they never reach the client.
func (v *Validator) Check(content string) Outcome {
	obj, err := extract(content, v.hasSchema())
	if err != nil {
		return Outcome{Errors: []string{"response is not a JSON object: " + err.Error()}}
	}
	var (
		out  Outcome
		errs []string
		r    = &out.Response
	)
	r.Thought, errs = stringField(&obj, "thought", true, errs)
	r.Status, errs = stringField(&obj, "status", true, errs)
	if r.Status == StatusNeedsInput {
		r.Status, out.StatusFrom = StatusClarificationNeeded, StatusNeedsInput
	}
	if raw, _ := obj.get("status"); kindOf(raw) == "string" && !slices.Contains(statuses, r.Status) {
		errs = append(errs, "/status: must be one of "+strings.Join(statuses, ", "))
	}
	switch data, ok := obj.get("data"); {
	case !ok:
		errs = append(errs, "/data: required field is missing")
	case kindOf(data) != "object":
		errs = append(errs, "/data: got "+kindOf(data)+", want object")
	default:
		r.Data = json.RawMessage(data)
		switch r.Status {
		case StatusRetryWithInstruction:
			// A control answer, not a result: its data is the instruction
			// for the previous agent, not the agent's own payload.
			if s, ok := dataMember(data, "instruction").(string); !ok || strings.TrimSpace(s) == "" {
				errs = append(errs, "/data/instruction: a retry_with_instruction answer needs a non-empty string")
			}
		case StatusWaitingForHuman:
			// Asking for a person: there is no result to check yet.
		default:
			errs = append(errs, v.checkData(obj.data)...)
		}
	}
	r.Message, errs = stringField(&obj, "message", true, errs)
	if raw, _ := obj.get("next_step_hint"); kindOf(raw) != "null" {
		r.NextStepHint, errs = stringField(&obj, "next_step_hint", false, errs)
	}

	if len(errs) > maxErrors {
		errs = append(errs[:maxErrors:maxErrors], fmt.Sprintf("... and %d more errors", len(errs)-maxErrors))
	}
	out.Errors = errs
	out.Valid = len(errs) == 0
	return out
}

// dataMember is member name of the data object raw, nil when absent. raw
// passed the strict parser (no repeated names, valid UTF-8), so decoding it
// into a map reads the same members; a map keeps names exact, where a
// struct would match them case-insensitively.
func dataMember(raw string, name string) any {
	var m map[string]any
	if json.Unmarshal([]byte(raw), &m) != nil {
		return nil
	}
	return m[name]
}

func (v *Validator) hasSchema() bool { return v != nil && v.schema != nil }

// stringField reads a string member, appending to errs what is wrong with it.
func stringField(obj *object, name string, required bool, errs []string) (string, []string) {
	raw, ok := obj.get(name)
	if !ok {
		if required {
			errs = append(errs, "/"+name+": required field is missing")
		}
		return "", errs
	}
	if k := kindOf(raw); k != "string" {
		return "", append(errs, "/"+name+": got "+k+", want string")
	}
	// raw was validated by the parser: strip the quotes and decode.
	return unquote(raw[1 : len(raw)-1]), errs
}

// checkData validates the decoded data against the schema and returns one
// message per leaf error.
func (v *Validator) checkData(doc any) []string {
	if !v.hasSchema() {
		return nil
	}
	err := v.schema.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{"/data: " + err.Error()}
	}
	var leaves []leaf
	leafErrors(ve.DetailedOutput(), &leaves)
	// The validator walks maps, so the order of causes is random; sorting
	// makes the re-ask prompt and the audit trail reproducible. Sorting by
	// path first puts "/data/items/0" before "/data/items/0/sku".
	slices.SortFunc(leaves, func(a, b leaf) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return strings.Compare(a.msg, b.msg)
	})
	leaves = slices.Compact(leaves)
	msgs := make([]string, len(leaves))
	for i, l := range leaves {
		msgs[i] = "/data" + l.path + ": " + l.msg
	}
	return msgs
}

// leaf is one keyword failure: the instance location relative to "data" (a
// JSON pointer) and the library's message.
type leaf struct{ path, msg string }

// leafErrors flattens the detailed output to its leaves: the keyword failures
// themselves ("got string, want number"), not the groups around them
// ("allOf failed"). The detailed output is used rather than the error tree
// because it renders messages without importing a localisation package.
func leafErrors(u *jsonschema.OutputUnit, out *[]leaf) {
	if len(u.Errors) == 0 {
		if u.Error != nil {
			*out = append(*out, leaf{u.InstanceLocation, u.Error.String()})
		}
		return
	}
	for i := range u.Errors {
		leafErrors(&u.Errors[i], out)
	}
}

// Compact encodes r as compact JSON with the fields in protocol order and
// "next_step_hint" only when set. It does not validate r; Data that is empty
// or not valid JSON is written as {} so the output is always a well-formed
// SACP object.
func (r Response) Compact() []byte {
	if len(r.Data) == 0 {
		r.Data = json.RawMessage("{}")
	}
	b, err := encode(r)
	if err != nil {
		// Only Data can fail to encode.
		r.Data = json.RawMessage("{}")
		b, _ = encode(r)
	}
	return b
}

// ReaskPrompt is the user message the proxy appends when it asks the model
// again with the errors while attempts remain. It lists errs and restates that
// the answer must be the bare JSON object, since most failures are prose or
// fences around it.
func ReaskPrompt(errs []string) string {
	return Reask("Your previous response does not follow the required JSON response protocol.", errs,
		"Reply again with only the corrected JSON object, with no text or markdown code fences before or after it. "+
			`It must have "thought" (string), "status" (one of `+strings.Join(statuses, ", ")+
			`), "data" (object), "message" (string) and optionally "next_step_hint" (string).`)
}

// Reask builds a re-ask message of any response protocol: what is wrong
// (intro), the problems found, one per line, then what to send instead.
func Reask(intro string, errs []string, instruction string) string {
	var b strings.Builder
	b.WriteString(intro)
	b.WriteByte('\n')
	if len(errs) > 0 {
		b.WriteString("Problems found:\n")
		for _, e := range errs {
			b.WriteString("- ")
			b.WriteString(e)
			b.WriteByte('\n')
		}
	}
	b.WriteString("\n")
	b.WriteString(instruction)
	return b.String()
}

// encode is json.Marshal without HTML escaping and without the trailing
// newline. Its output goes to LLM APIs and API clients, not into web pages,
// and escaping would needlessly rewrite "<" and "&" in every value carried
// through.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// textFields are the answer's fields a redactor may be told to scan, in
// wire order (protocol.redaction.apply_to names them).
var textFields = [...]string{"thought", "message", "data", "next_step_hint"}

// Fields lists the fields of a SACP answer that redaction can cover, in
// wire order.
func Fields() []string { return append([]string(nil), textFields[:]...) }
