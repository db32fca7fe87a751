package sacp

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
)

const invoiceSchema = "testdata/invoice.schema.json"

func newInvoiceValidator(tb testing.TB) *Validator {
	tb.Helper()
	b, err := os.ReadFile(invoiceSchema)
	if err != nil {
		tb.Fatal(err)
	}
	v, err := NewValidator(b, invoiceSchema)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// answer builds a SACP answer from its fields; a nil field is left out.
func answer(fields map[string]any) string {
	b, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func validFields() map[string]any {
	return map[string]any{
		"thought": "Read the invoice.",
		"status":  "success",
		"data":    map[string]any{"amount": 12.5, "currency": "EUR"},
		"message": "Invoice total is 12.50 EUR.",
	}
}

// with returns validFields with key set to val, or removed when val is del.
// withStatus is a valid answer with another status and data.
func withStatus(status string, data map[string]any) map[string]any {
	f := with("status", status)
	f["data"] = data
	return f
}

func with(key string, val any) map[string]any {
	f := validFields()
	if val == del {
		delete(f, key)
	} else {
		f[key] = val
	}
	return f
}

var del = &struct{}{}

func TestCheck(t *testing.T) {
	v := newInvoiceValidator(t)
	statusErr := "/status: must be one of success, failure, clarification_needed, completed, retry_with_instruction, WAITING_FOR_HUMAN"
	tests := []struct {
		name       string
		content    string
		wantErrs   []string // nil: valid
		wantStatus string   // checked when not empty
	}{
		{name: "valid", content: answer(validFields()), wantStatus: "success"},
		{name: "valid in prose and fence", content: "Sure.\n```json\n" + answer(validFields()) + "\n```\nDone.", wantStatus: "success"},
		{name: "valid with next_step_hint", content: answer(with("next_step_hint", "route to billing"))},
		{name: "null next_step_hint counts as absent", content: answer(with("next_step_hint", nil))},
		{name: "status completed", content: answer(with("status", "completed")), wantStatus: "completed"},
		{name: "status clarification_needed", content: answer(with("status", "clarification_needed"))},
		// The protocol's own synonym, read as what the answer format calls it.
		{name: "status needs_input", content: answer(with("status", "needs_input")), wantStatus: "clarification_needed"},
		{name: "status Needs_Input is not a synonym", content: answer(with("status", "Needs_Input")), wantErrs: []string{statusErr}, wantStatus: "Needs_Input"},
		// Control statuses of workflows: their data is not the agent's
		// payload, so the schema (amount, currency) does not apply.
		{name: "retry_with_instruction with an instruction", content: answer(withStatus("retry_with_instruction", map[string]any{"instruction": "use the domain acme.com"})), wantStatus: "retry_with_instruction"},
		{name: "retry_with_instruction without an instruction", content: answer(withStatus("retry_with_instruction", map[string]any{"amount": 1, "currency": "EUR"})),
			wantErrs: []string{"/data/instruction: a retry_with_instruction answer needs a non-empty string"}},
		{name: "retry_with_instruction with a blank instruction", content: answer(withStatus("retry_with_instruction", map[string]any{"instruction": " "})),
			wantErrs: []string{"/data/instruction: a retry_with_instruction answer needs a non-empty string"}},
		{name: "retry_with_instruction: the name is exact", content: answer(withStatus("retry_with_instruction", map[string]any{"Instruction": "x"})),
			wantErrs: []string{"/data/instruction: a retry_with_instruction answer needs a non-empty string"}},
		{name: "WAITING_FOR_HUMAN skips the payload schema", content: answer(withStatus("WAITING_FOR_HUMAN", map[string]any{})), wantStatus: "WAITING_FOR_HUMAN"},
		{name: "unknown top-level keys allowed", content: answer(with("confidence", 0.9))},
		{name: "missing thought", content: answer(with("thought", del)), wantErrs: []string{"/thought: required field is missing"}},
		{name: "missing status", content: answer(with("status", del)), wantErrs: []string{"/status: required field is missing"}},
		{name: "missing data", content: answer(with("data", del)), wantErrs: []string{"/data: required field is missing"}},
		{name: "missing message", content: answer(with("message", del)), wantErrs: []string{"/message: required field is missing"}},
		{name: "bad status", content: answer(with("status", "done")), wantErrs: []string{statusErr}, wantStatus: "done"},
		{name: "status not a string", content: answer(with("status", 1)), wantErrs: []string{"/status: got number, want string"}},
		{name: "thought not a string", content: answer(with("thought", []string{"a"})), wantErrs: []string{"/thought: got array, want string"}},
		{name: "message null", content: answer(with("message", nil)), wantErrs: []string{"/message: got null, want string"}},
		{name: "next_step_hint not a string", content: answer(with("next_step_hint", true)), wantErrs: []string{"/next_step_hint: got boolean, want string"}},
		{name: "data is an array", content: answer(with("data", []int{1})), wantErrs: []string{"/data: got array, want object"}},
		{name: "data is null", content: answer(with("data", nil)), wantErrs: []string{"/data: got null, want object"}},
		{name: "data is a string", content: answer(with("data", "{}")), wantErrs: []string{"/data: got string, want object"}},
		{
			name:     "schema: wrong type names the path",
			content:  answer(with("data", map[string]any{"amount": "12", "currency": "EUR"})),
			wantErrs: []string{"/data/amount: got string, want number"},
		},
		{
			name:     "schema: missing property",
			content:  answer(with("data", map[string]any{"amount": 1})),
			wantErrs: []string{"/data: missing property 'currency'"},
		},
		{
			name:     "schema: enum and format",
			content:  answer(with("data", map[string]any{"amount": 1, "currency": "GBP", "customer": "nobody"})),
			wantErrs: []string{"/data/currency: value must be one of 'EUR', 'USD'", "/data/customer: 'nobody' is not valid email: missing @"},
		},
		{
			name: "schema: nested paths, parents first",
			content: answer(with("data", map[string]any{"amount": 1, "currency": "USD", "items": []any{
				map[string]any{"sku": "a", "qty": 1},
				map[string]any{"sku": 7},
			}})),
			wantErrs: []string{"/data/items/1: missing property 'qty'", "/data/items/1/sku: got number, want string"},
		},
		{
			name:     "envelope and schema errors together, envelope first",
			content:  answer(map[string]any{"status": "ok", "data": map[string]any{"amount": -1, "currency": "EUR"}, "message": 3}),
			wantErrs: []string{"/thought: required field is missing", statusErr, "/data/amount: minimum: got -1, want 0", "/message: got number, want string"},
		},
		{name: "not json", content: "I refuse.", wantErrs: []string{"response is not a JSON object: no JSON object found"}},
		{name: "broken json", content: `{"thought": "x",}`, wantErrs: []string{"response is not a JSON object: invalid character '}' looking for beginning of object key string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := v.Check(tt.content)
			if out.Valid != (tt.wantErrs == nil) || !reflect.DeepEqual(out.Errors, tt.wantErrs) {
				t.Fatalf("Check() valid=%v errors=%q; want errors %q", out.Valid, out.Errors, tt.wantErrs)
			}
			if tt.wantStatus != "" && out.Response.Status != tt.wantStatus {
				t.Errorf("Response.Status = %q, want %q", out.Response.Status, tt.wantStatus)
			}
		})
	}
}

func TestCheckWithoutSchema(t *testing.T) {
	anyData := answer(with("data", map[string]any{"anything": []any{1, "x"}}))
	for name, v := range map[string]*Validator{"nil validator": nil, "nil schema": mustValidator(t, nil), "blank schema": mustValidator(t, []byte(" \n"))} {
		t.Run(name, func(t *testing.T) {
			if out := v.Check(anyData); !out.Valid {
				t.Errorf("Check() errors = %q, want valid", out.Errors)
			}
			if out := v.Check(answer(with("data", 1))); out.Valid {
				t.Error("data must still be an object")
			}
		})
	}
}

func mustValidator(t *testing.T, schema []byte) *Validator {
	t.Helper()
	v, err := NewValidator(schema, "inline")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCheckResponseFields(t *testing.T) {
	content := "ok ```json\n" + `{"thought":"t \u00e9","status":"success","data":{ "amount" : 1, "currency":"USD" },"message":"m","next_step_hint":"h","extra":{"x":1}}` + "\n```"
	out := newInvoiceValidator(t).Check(content)
	if !out.Valid {
		t.Fatal(out.Errors)
	}
	want := `{"thought":"t é","status":"success","data":{"amount":1,"currency":"USD"},"message":"m","next_step_hint":"h"}`
	if got := string(out.Response.Compact()); got != want {
		t.Errorf("Compact() =\n%s\nwant\n%s", got, want)
	}
}

func TestCheckCapsErrors(t *testing.T) {
	items := make([]any, 50)
	for i := range items {
		items[i] = map[string]any{"sku": i, "qty": 1}
	}
	out := newInvoiceValidator(t).Check(answer(with("data", map[string]any{"amount": 1, "currency": "EUR", "items": items})))
	if len(out.Errors) != maxErrors+1 {
		t.Fatalf("got %d errors, want %d", len(out.Errors), maxErrors+1)
	}
	if last := out.Errors[maxErrors]; last != "... and 30 more errors" {
		t.Errorf("last error = %q", last)
	}
}

// Errors come from map walks inside the schema library; their order must
// still be stable for the re-ask prompt and the audit trail.
func TestCheckErrorOrderIsStable(t *testing.T) {
	v := newInvoiceValidator(t)
	content := answer(with("data", map[string]any{"amount": "x", "currency": "x", "customer": "x", "items": "x"}))
	first := v.Check(content).Errors
	if len(first) != 4 {
		t.Fatalf("errors = %q, want 4", first)
	}
	for range 50 {
		if got := v.Check(content).Errors; !reflect.DeepEqual(got, first) {
			t.Fatalf("order changed:\n%q\n%q", got, first)
		}
	}
}

func TestCheckConcurrent(t *testing.T) {
	v := newInvoiceValidator(t)
	good, bad := answer(validFields()), answer(with("data", map[string]any{"amount": "x", "currency": "EUR"}))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				if v.Check(good).Valid != true || v.Check(bad).Valid != false {
					t.Errorf("goroutine %d: wrong result", i)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestNewValidatorErrors(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		wantErr string
	}{
		{name: "not json", schema: `{"type":`, wantErr: "data schema bad.json: "},
		{name: "not a schema", schema: `{"type":"bogus"}`, wantErr: "is not valid against metaschema"},
		{name: "relative file ref", schema: `{"$ref":"other.json"}`, wantErr: "data schemas must be self-contained"},
		{name: "file url ref", schema: `{"$ref":"file:///etc/passwd"}`, wantErr: "data schemas must be self-contained"},
		{name: "remote ref", schema: `{"$ref":"https://example.com/s.json"}`, wantErr: "data schemas must be self-contained"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewValidator([]byte(tt.schema), "bad.json")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "data schema bad.json: ") {
				t.Errorf("err = %v, want it to name bad.json and contain %q", err, tt.wantErr)
			}
		})
	}
	// Local references are fine.
	if _, err := NewValidator([]byte(`{"properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`), "ok.json"); err != nil {
		t.Errorf("local $ref: %v", err)
	}
}

func TestCompact(t *testing.T) {
	tests := []struct {
		name string
		r    Response
		want string
	}{
		{
			name: "field order, data compacted, no html escaping",
			r:    Response{NextStepHint: "n", Message: "a<b>&c", Data: json.RawMessage("{\n  \"k\": [1, 2]\n}"), Status: "success", Thought: "t"},
			want: `{"thought":"t","status":"success","data":{"k":[1,2]},"message":"a<b>&c","next_step_hint":"n"}`,
		},
		{name: "hint omitted when empty", r: Response{Status: "failure", Data: json.RawMessage(`{}`)}, want: `{"thought":"","status":"failure","data":{},"message":""}`},
		{name: "nil data written as {}", r: Response{Status: "success"}, want: `{"thought":"","status":"success","data":{},"message":""}`},
		{name: "invalid data written as {}", r: Response{Status: "success", Data: json.RawMessage(`{"a":`)}, want: `{"thought":"","status":"success","data":{},"message":""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(tt.r.Compact()); got != tt.want {
				t.Errorf("Compact() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestReaskPrompt(t *testing.T) {
	errs := []string{"/status: must be one of success, failure, clarification_needed, completed, retry_with_instruction, WAITING_FOR_HUMAN", "/data/amount: got string, want number"}
	p := ReaskPrompt(errs)
	for _, want := range append(errs, "only the corrected JSON object", "no text or markdown code fences") {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q:\n%s", want, p)
		}
	}
	if p := ReaskPrompt(nil); !strings.Contains(p, "only the corrected JSON object") || strings.Contains(p, "Problems found") {
		t.Errorf("prompt without errors:\n%s", p)
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		answer(validFields()),
		"```json\n" + answer(with("next_step_hint", "x")) + "\n```",
		answer(with("data", map[string]any{"amount": "1", "currency": "EUR"})),
		answer(with("status", "nope")),
		`{"thought":"\ud800","status":"success","data":{"amount":1e999,"currency":"EUR","amount":2},"message":"","status":"completed"}`,
		"{\"thought\":\"a\xffb\",\"status\":\"failure\",\"data\":{\"amount\":0,\"currency\":\"USD\",\"note\":\"\xfe\"},\"message\":\"\"}",
		"plain text",
	} {
		f.Add(s)
	}
	v := newInvoiceValidator(f)
	f.Fuzz(func(t *testing.T, content string) {
		out := v.Check(content)
		if out.Valid != (len(out.Errors) == 0) {
			t.Fatalf("Valid=%v with errors %q", out.Valid, out.Errors)
		}
		if !out.Valid {
			return
		}
		compact := out.Response.Compact()
		again := v.Check(string(compact))
		if !again.Valid {
			t.Fatalf("Compact() %s does not re-check: %q", compact, again.Errors)
		}
		if got := again.Response.Compact(); string(got) != string(compact) {
			t.Fatalf("Compact() is not a fixed point:\n%s\n%s", compact, got)
		}
	})
}

// realisticAnswer is what a model typically sends despite the template: a
// sentence, a fenced, pretty-printed SACP object and a closing sentence. Its
// size is spread the way long answers are: prose in "thought" and "message"
// (escaped newlines and quotes, non-ASCII), line items under "data" that the
// schema checks one by one, and a long text field in "data".
func realisticAnswer(size int) string {
	const sentence = `I checked line \"%d\" against the order and the total (%d.50 €) matches {as expected}.\n`
	prose := func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, sentence, i, i*3)
		}
		return b.String()
	}
	var items strings.Builder
	for i := 0; items.Len() < size*3/10; i++ {
		if i > 0 {
			items.WriteString(",\n")
		}
		fmt.Fprintf(&items, `      {"sku": "SKU-%05d", "name": "Widget %d <blue>", "qty": %d, "price": %d.99}`, i, i, i%7+1, i%50)
	}
	return "Sure! I extracted the invoice you sent; the details are below.\n\n```json\n" +
		"{\n" +
		`  "thought": "` + prose(size*15/100) + `",` + "\n" +
		`  "status": "success",` + "\n" +
		`  "data": {` + "\n" +
		`    "amount": 1234.56,` + "\n" +
		`    "currency": "EUR",` + "\n" +
		`    "customer": "billing@example.com",` + "\n" +
		`    "items": [` + "\n" + items.String() + "\n    ],\n" +
		`    "report": "` + prose(size*25/100) + `"` + "\n  },\n" +
		`  "message": "` + prose(size*25/100) + `",` + "\n" +
		`  "next_step_hint": "send to accounting"` + "\n" +
		"}\n```\n\nLet me know if you need anything else."
}

// BenchmarkCheck measures sanitize + parse + validate of realistic answers
// against a small schema: top-level data fields checked, line items only
// counted, as a typical agent schema does.
func BenchmarkCheck(b *testing.B) {
	benchmarkCheck(b, "testdata/summary.schema.json")
}

// BenchmarkCheckPerItemSchema is the same with a schema for every line item
// (testdata/invoice.schema.json): the schema library's cost per validated
// value then dominates.
func BenchmarkCheckPerItemSchema(b *testing.B) {
	benchmarkCheck(b, invoiceSchema)
}

func benchmarkCheck(b *testing.B, schemaFile string) {
	schema, err := os.ReadFile(schemaFile)
	if err != nil {
		b.Fatal(err)
	}
	v, err := NewValidator(schema, schemaFile)
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []struct {
		name string
		n    int
	}{{"1KB", 1 << 10}, {"16KB", 16 << 10}, {"256KB", 256 << 10}} {
		content := realisticAnswer(size.n)
		if out := v.Check(content); !out.Valid {
			b.Fatalf("%s answer is invalid: %q", size.name, out.Errors)
		}
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(content)))
			for b.Loop() {
				v.Check(content)
			}
		})
	}
}
