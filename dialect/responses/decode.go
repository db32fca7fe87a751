package responses

import (
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// decodeRequest is the one strict reading of the body (see
// neutral.Decode); an unknown member of a typed object of a type not
// accepted is refused for its type.
func decodeRequest(body []byte) (*request, error) {
	return neutral.Decode[request](body, refusedType)
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
		return typeError(neutral.Dotted(p.Parent())+".type", o.what, typ, o.types)
	}
	return nil
}

// typeError refuses an object's type, naming those accepted.
func typeError(path, what, typ string, accepted []string) error {
	return errorf(path, "%s type %q is not supported by this gateway (accepted: %s)", what, typ, strings.Join(accepted, ", "))
}
