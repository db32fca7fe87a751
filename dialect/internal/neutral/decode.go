package neutral

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/sacpgw/gateway/internal/strictjson"
)

// FieldError is a client error about one field; the path is dotted the way
// the APIs' own errors name fields ("messages.0.content.1.type"). It is
// the strict reading's error: one shape for a refused document, whoever
// refused it.
type FieldError = strictjson.Error

// Errorf is a FieldError about the field at path.
func Errorf(path, format string, args ...any) error {
	return &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Decode is the one strict reading of a client's body into a T: valid
// UTF-8, no duplicate names, no unknown members. unknown, when not nil,
// may name a better error for an unknown member at a JSON pointer than
// the general one (nil: the general one).
func Decode[T any](body []byte, unknown func(body []byte, p jsontext.Pointer) error) (*T, error) {
	if len(body) == 0 {
		return nil, Errorf("", "the request body is empty")
	}
	// jsontext refuses invalid UTF-8 only inside strings; anywhere else it
	// is a syntax error with a less helpful message.
	if !utf8.Valid(body) {
		return nil, Errorf("", "the request body is not valid UTF-8")
	}
	var req T
	if err := json.Unmarshal(body, &req, json.RejectUnknownMembers(true)); err != nil {
		return nil, decodeError(err, body, unknown)
	}
	return &req, nil
}

// decodeError names the field a decoding error is about.
func decodeError(err error, body []byte, unknown func(body []byte, p jsontext.Pointer) error) error {
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		path := Dotted(syn.JSONPointer)
		if errors.Is(syn.Err, jsontext.ErrDuplicateName) {
			return Errorf(path, "the member appears more than once")
		}
		return Errorf(path, "invalid JSON at byte %d: %v", syn.ByteOffset, syn.Err)
	}
	var sem *json.SemanticError
	if errors.As(err, &sem) {
		path := Dotted(sem.JSONPointer)
		switch {
		case errors.Is(sem.Err, json.ErrUnknownName):
			if unknown != nil {
				if err := unknown(body, sem.JSONPointer); err != nil {
					return err
				}
			}
			return Errorf(path, "unknown field: this gateway does not accept it (it refuses what it cannot translate)")
		case sem.JSONKind == 0 && sem.Err != nil:
			// One of the package's own unmarshalers (a union's shape).
			return Errorf(path, "%v", sem.Err)
		case sem.GoType != nil:
			msg := "expected " + expected(sem.GoType.Kind()) + ", got " + kindName(sem.JSONKind)
			if sem.Err != nil {
				msg += " (" + sem.Err.Error() + ")"
			}
			if path == "" {
				msg = "the request body: " + msg
			}
			return Errorf(path, "%s", msg)
		}
	}
	return Errorf("", "invalid request body: %v", err)
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

// Dotted turns a JSON pointer into a dotted field path
// ("messages.0.content.1.type").
func Dotted(p jsontext.Pointer) string {
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
