package neutral

import (
	"errors"
	"math"
	"net/url"
	"slices"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The request helpers both dialects use: how a translated request's values
// are written, and the checks both APIs make the same way.

// StringOrArray reads a member that is a string or an array, in the
// decoder's one pass with its options (duplicates, UTF-8, unknown
// members), so the array's elements are read as strictly as the rest. A
// string is set in text, an array in items; anything else is skipped and
// refused with the message want.
func StringOrArray[T any](dec *jsontext.Decoder, text **string, items *[]T, want string) error {
	switch dec.PeekKind() {
	case '"':
		var s string
		if err := json.UnmarshalDecode(dec, &s); err != nil {
			return err
		}
		*text = &s
		return nil
	case '[':
		return json.UnmarshalDecode(dec, items)
	}
	if err := dec.SkipValue(); err != nil {
		return err
	}
	return errors.New(want)
}

// CheckMembers refuses the first member present that its type does not
// allow: of names the type for the message ("a text block").
func CheckMembers(path string, present, allowed []string, of string) error {
	for _, name := range present {
		if !slices.Contains(allowed, name) {
			return Errorf(path+"."+name, "not a member of %s", of)
		}
	}
	return nil
}

// Members lists the members a value carries (a null one counts as
// absent), for CheckMembers.
type Members []string

// Add lists name when the value carries it.
func (m *Members) Add(name string, present bool) {
	if present {
		*m = append(*m, name)
	}
}

// CheckSampling holds temperature to 0..maxTemperature (the APIs differ)
// and top_p to 0..1.
func CheckSampling(temperature *float64, maxTemperature float64, topP *float64) error {
	for _, p := range []struct {
		name string
		v    *float64
		max  float64
	}{{"temperature", temperature, maxTemperature}, {"top_p", topP, 1}} {
		if p.v != nil && (math.IsNaN(*p.v) || *p.v < 0 || *p.v > p.max) {
			return Errorf(p.name, "must be between 0 and %g", p.max)
		}
	}
	return nil
}

// NameOK is the APIs' rule for function names, ^[a-zA-Z0-9_-]{1,max}$
// (Anthropic allows 128 characters, OpenAI 64).
func NameOK(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// IsHTTPURL reports whether s is an absolute http or https URL with a host:
// the only image URLs the neutral form passes on.
func IsHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

// FunctionChoice is the chat request's tool_choice naming one function.
func FunctionChoice(name string) jsontext.Value {
	type fn struct {
		Name string `json:"name"`
	}
	return MustJSON(struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}{"function", fn{name}})
}

// TextContent is one text as a string (what most readers of the neutral
// form expect), several as text parts (their boundaries kept), none as
// null.
func TextContent(texts []string) jsontext.Value {
	switch len(texts) {
	case 0:
		return jsontext.Value("null")
	case 1:
		return JSONString(texts[0])
	}
	parts := make([]ChatPart, len(texts))
	for i := range texts {
		parts[i] = ChatPart{Type: "text", Text: &texts[i]}
	}
	return MustJSON(parts)
}

// Compact is a JSON value as compact JSON (a copy), for the schemas and
// arguments the neutral form carries.
func Compact(v jsontext.Value) (jsontext.Value, error) {
	c := v.Clone()
	if err := c.Compact(); err != nil {
		return nil, err
	}
	return c, nil
}

// Object is the JSON object at path as compact JSON (a copy), for the
// schemas and arguments the neutral form carries; an error names path.
func Object(path string, v jsontext.Value) (jsontext.Value, error) {
	if v.Kind() != '{' {
		return nil, Errorf(path, "must be an object")
	}
	c, err := Compact(v)
	if err != nil {
		return nil, Errorf(path, "%v", err)
	}
	return c, nil
}

// JSONString is s as a JSON string.
func JSONString(s string) jsontext.Value {
	return MustJSON(s)
}

// MustJSON marshals values a dialect built itself from strictly read
// input; json v2 fails only on invalid UTF-8, which the reading refused.
func MustJSON(v any) jsontext.Value {
	b, err := json.Marshal(v)
	if err != nil {
		panic("dialect: marshaling a translated value: " + err.Error())
	}
	return b
}
