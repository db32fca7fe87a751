package responses

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// decodeRequest is the one strict reading of the body.
func decodeRequest(body []byte) (*request, error) {
	if len(body) == 0 {
		return nil, errorf("", "the request body is empty")
	}
	// jsontext refuses invalid UTF-8 only inside strings; anywhere else it
	// is a syntax error with a less helpful message.
	if !utf8.Valid(body) {
		return nil, errorf("", "the request body is not valid UTF-8")
	}
	var req request
	if err := json.Unmarshal(body, &req, json.RejectUnknownMembers(true)); err != nil {
		return nil, decodeError(err, body)
	}
	return &req, nil
}

// decodeError names the field a decoding error is about.
func decodeError(err error, body []byte) error {
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		path := dotted(syn.JSONPointer)
		if errors.Is(syn.Err, jsontext.ErrDuplicateName) {
			return errorf(path, "the member appears more than once")
		}
		return errorf(path, "invalid JSON at byte %d: %v", syn.ByteOffset, syn.Err)
	}
	var sem *json.SemanticError
	if errors.As(err, &sem) {
		path := dotted(sem.JSONPointer)
		switch {
		case errors.Is(sem.Err, json.ErrUnknownName):
			if err := refusedType(body, sem.JSONPointer); err != nil {
				return err
			}
			return errorf(path, "unknown field: this gateway does not accept it (it refuses what it cannot translate)")
		case sem.JSONKind == 0 && sem.Err != nil:
			// One of the package's own unmarshalers (a union's shape).
			return errorf(path, "%v", sem.Err)
		case sem.GoType != nil:
			msg := "expected " + expected(sem.GoType.Kind()) + ", got " + kindName(sem.JSONKind)
			if sem.Err != nil {
				msg += " (" + sem.Err.Error() + ")"
			}
			if path == "" {
				msg = "the request body: " + msg
			}
			return errorf(path, "%s", msg)
		}
	}
	return errorf("", "invalid request body: %v", err)
}

// expected names a Go kind as the JSON the client should have sent.
func expected(k reflect.Kind) string {
	switch k {
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another type"
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "another value"
}

// dotted turns a JSON pointer into a dotted field path ("input.0.content.1.type").
func dotted(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
		// A path as deep as the decoder allows would make a message of
		// kilobytes; its start says where.
		if b.Len() > 200 {
			b.WriteString("...")
			break
		}
	}
	return b.String()
}

// The types accepted where objects are typed, by where they are: an object
// of another type is refused for its type, even when a member of it (one no
// accepted type has) is what the decoder stopped at.
var typedObjects = []struct {
	at    func(tokens []string) bool
	what  string
	types []string
}{
	{func(t []string) bool { return len(t) == 2 && t[0] == "input" }, "input item", itemTypes},
	{func(t []string) bool {
		return len(t) == 4 && t[0] == "input" && (t[2] == "content" || t[2] == "output")
	}, "content part", partTypes},
	{func(t []string) bool { return len(t) == 2 && t[0] == "tools" }, "tool", toolTypes},
	{func(t []string) bool { return len(t) == 1 && t[0] == "tool_choice" }, "tool choice", toolTypes},
	{func(t []string) bool { return len(t) == 2 && t[0] == "text" && t[1] == "format" }, "text format", formatTypes},
}

// refusedType is the error for the type of the object holding the unknown
// member at p, when the object is typed and its type is not accepted; nil
// otherwise.
func refusedType(body []byte, p jsontext.Pointer) error {
	tokens := slices.Collect(p.Tokens())
	if len(tokens) == 0 {
		return nil
	}
	parent := tokens[:len(tokens)-1]
	for _, o := range typedObjects {
		if !o.at(parent) {
			continue
		}
		// The body was read up to the error; read it again leniently to
		// find the type (it may come after the member).
		var v any
		if json.Unmarshal(body, &v, jsontext.AllowDuplicateNames(true)) != nil {
			return nil
		}
		for _, tok := range parent {
			switch x := v.(type) {
			case map[string]any:
				v = x[tok]
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(x) {
					return nil
				}
				v = x[i]
			default:
				return nil
			}
		}
		obj, _ := v.(map[string]any)
		typ, ok := obj["type"].(string)
		if !ok || slices.Contains(o.types, typ) {
			return nil
		}
		return typeError(dotted(p.Parent())+".type", o.what, typ, o.types)
	}
	return nil
}

// typeError refuses an object's type, naming those accepted.
func typeError(path, what, typ string, accepted []string) error {
	return errorf(path, "%s type %q is not supported by this gateway (accepted: %s)", what, typ, strings.Join(accepted, ", "))
}
