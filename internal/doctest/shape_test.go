package doctest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/strictjson"
)

// elide removes the bare "…" (U+2026) that the docs write for "more elements
// or members here", with the comma that joins it to its neighbours, so that
// the rest of an example can still be read strictly. An ellipsis inside a
// string is text and stays. It reports whether it removed any.
func elide(src string) (string, bool) {
	var out strings.Builder
	inString, escaped, removed := false, false, false
	for i := 0; i < len(src); {
		r := src[i:]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case r[0] == '\\':
				escaped = true
			case r[0] == '"':
				inString = false
			}
		case r[0] == '"':
			inString = true
		case strings.HasPrefix(r, "…"):
			removed = true
			i += len("…")
			// "a, …]": drop the comma before; "[…, b]": the comma after.
			kept := strings.TrimRight(out.String(), " \t\n")
			if strings.HasSuffix(kept, ",") {
				out.Reset()
				out.WriteString(strings.TrimSuffix(kept, ","))
			} else if rest := strings.TrimLeft(src[i:], " \t\n"); strings.HasPrefix(rest, ",") {
				i = len(src) - len(rest) + 1
			}
			continue
		}
		out.WriteByte(src[i])
		i++
	}
	return out.String(), removed
}

// readJSON reads one example strictly (valid UTF-8, no duplicate names at any
// depth, nothing after the value), after elide. Numbers stay json.Number.
func readJSON(text string) (v any, elided bool, err error) {
	text, elided = elide(text)
	if err := strictjson.Check([]byte(text), nil); err != nil {
		return nil, elided, err
	}
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	err = d.Decode(&v)
	return v, elided, err
}

// lastJSON is the last of the JSON values a command printed: a run block may
// print several (a setup call, then the call the example shows).
func lastJSON(out []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(out))
	d.UseNumber()
	var last any
	n := 0
	for {
		var v any
		err := d.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the output is not a sequence of JSON values (after %d): %v", n, err)
		}
		last, n = v, n+1
	}
	if n == 0 {
		return nil, errors.New("the command printed no JSON")
	}
	return last, nil
}

// kindOf names the JSON kind of a decoded value.
func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// shapeDiffs lists where the example doc is not the shape of the real answer:
// every member of doc, at every depth, must be in real with the same JSON
// kind; values may differ (ids, times, digests). An element of an array is
// compared with the real element at its index, or the last one when the real
// array is shorter. With complete, every member of a real object must also
// be in the example's object: the example shows the whole answer.
func shapeDiffs(path string, doc, real any, complete bool) []string {
	if kd, kr := kindOf(doc), kindOf(real); kd != kr {
		return []string{fmt.Sprintf("%s is %s in the doc, %s in the real answer", path, kd, kr)}
	}
	var diffs []string
	switch d := doc.(type) {
	case map[string]any:
		r := real.(map[string]any)
		for _, k := range sortedKeys(d) {
			rv, ok := r[k]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s is in the doc, not in the real answer", path, k))
				continue
			}
			diffs = append(diffs, shapeDiffs(path+"."+k, d[k], rv, complete)...)
		}
		if complete {
			for _, k := range sortedKeys(r) {
				if _, ok := d[k]; !ok {
					diffs = append(diffs, fmt.Sprintf("%s.%s is in the real answer, not in the doc", path, k))
				}
			}
		}
	case []any:
		r := real.([]any)
		if len(d) > 0 && len(r) == 0 {
			return []string{fmt.Sprintf("%s has elements in the doc, none in the real answer", path)}
		}
		for i, e := range d {
			diffs = append(diffs, shapeDiffs(fmt.Sprintf("%s[%d]", path, i), e, r[min(i, len(r)-1)], complete)...)
		}
	}
	return diffs
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestElide(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": [1, …], "b": "x…y", …}`:        `{"a": [1], "b": "x…y"}`,
		`[{"node": "r", …}, {…}]`:             `[{"node": "r"}, {}]`,
		"{\n  …,\n  \"a\": 1\n}":              "{\n  \n  \"a\": 1\n}",
		`{"s": "a \"…\" b", "t": […]}`:        `{"s": "a \"…\" b", "t": []}`,
		`{"no": "ellipsis", "n": [1, 2, 3]} `: `{"no": "ellipsis", "n": [1, 2, 3]} `,
	} {
		if got, _ := elide(in); got != want {
			t.Errorf("elide(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestShapeDiffs(t *testing.T) {
	real := `{"id": "req-2b6d", "n": 3, "ok": true, "reason": null, "list": [{"a": 1, "b": "x"}], "empty": [], "extra": 1}`
	r, _, err := readJSON(real)
	if err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string]string{
		`{"id": "dec-1", "n": 7, "list": [{"a": 2}, …], …}`:        "",
		`{"id": "x", "list": [{"a": 1}, {"b": "y"}], "empty": []}`: "",
		`{"id": 1}`:                               "$.id is number in the doc, string in the real answer",
		`{"reason": "because"}`:                   "$.reason is string in the doc, null in the real answer",
		`{"list": [{"c": 1}]}`:                    "$.list[0].c is in the doc, not in the real answer",
		`{"empty": [{"c": 1}]}`:                   "$.empty has elements in the doc, none in the real answer",
		`{"missing": {"deep": [1]}, "ok": false}`: "$.missing is in the doc, not in the real answer",
	} {
		d, _, err := readJSON(doc)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if got := strings.Join(shapeDiffs("$", d, r, false), "; "); got != want {
			t.Errorf("%s: %q, want %q", doc, got, want)
		}
	}
	d, _, _ := readJSON(`{"id": "", "n": 0, "ok": false, "reason": null, "list": [{"a": 0}], "empty": []}`)
	if got := strings.Join(shapeDiffs("$", d, r, true), "; "); got != "$.list[0].b is in the real answer, not in the doc; $.extra is in the real answer, not in the doc" {
		t.Errorf("complete: %s", got)
	}
	if _, _, err := readJSON(`{"a": 1, "a": 2}`); err == nil {
		t.Error("a duplicate name was read")
	}
}
