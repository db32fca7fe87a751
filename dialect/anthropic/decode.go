package anthropic

import (
	"errors"
	"reflect"
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
		return nil, decodeError(err)
	}
	return &req, nil
}

// decodeError names the field a decoding error is about.
func decodeError(err error) error {
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

// dotted turns a JSON pointer into Anthropic's dotted field path.
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
