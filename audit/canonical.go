package audit

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// canonicalSummary returns the RFC 8785 form of a summary. The summaries
// the gateway writes are trees of maps, slices, strings, numbers and bools:
// those are encoded directly (numbers through jcs.NumberToJSON, strings
// through appendCanonicalString), which saves the marshal-then-reparse of
// jcs.Transform on every entry. Anything else takes the general path.
// TestCanonicalSummaryMatchesJCS holds both paths to the same bytes.
func canonicalSummary(s map[string]any) ([]byte, error) {
	if b, ok := appendCanonical(make([]byte, 0, 512), s, 0); ok {
		return b, nil
	}
	raw, err := json.Marshal(bigIntsAsStrings(s))
	if err != nil {
		return nil, fmt.Errorf("encode summary: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalize summary: %w", err)
	}
	return out, nil
}

// bigIntsAsStrings returns v with each integer beyond ±(2^53-1) replaced
// by its decimal string (appendInt's rule), for the general path: after
// encoding/json an integer and a float64 that holds an integer look alike,
// so the types are told apart here. Maps and slices other than these, and
// structs, are passed on as they are.
func bigIntsAsStrings(v any) any {
	switch x := v.(type) {
	case int:
		return bigIntsAsStrings(int64(x))
	case int64:
		if x > maxSafeInt || x < -maxSafeInt {
			return strconv.FormatInt(x, 10)
		}
	case uint:
		return bigIntsAsStrings(uint64(x))
	case uint64:
		if x > maxSafeInt {
			return strconv.FormatUint(x, 10)
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = bigIntsAsStrings(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = bigIntsAsStrings(e)
		}
		return out
	case map[string]int:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = bigIntsAsStrings(e)
		}
		return out
	}
	return v
}

// maxCanonicalDepth bounds recursion; deeper trees take the general path.
const maxCanonicalDepth = 32

// appendCanonical appends v's canonical JSON; ok=false means "type not
// handled here" and the caller falls back to jcs.Transform.
func appendCanonical(b []byte, v any, depth int) ([]byte, bool) {
	if depth > maxCanonicalDepth {
		return b, false
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		if !utf8.ValidString(x) {
			return b, false // let the general path apply encoding/json's rules
		}
		return appendCanonicalString(b, x), true
	case bool:
		if x {
			return append(b, "true"...), true
		}
		return append(b, "false"...), true
	case int:
		return appendInt(b, int64(x)), true
	case int64:
		return appendInt(b, x), true
	case uint:
		return appendUint(b, uint64(x)), true
	case uint64:
		return appendUint(b, x), true
	case float64:
		return appendNumber(b, x)
	case []string:
		return appendArray(b, x, depth)
	case []any:
		return appendArray(b, x, depth)
	case map[string]any:
		return appendObject(b, x, depth)
	case map[string]int:
		m := make(map[string]any, len(x))
		for k, n := range x {
			m[k] = n
		}
		return appendObject(b, m, depth)
	default:
		return b, false
	}
}

// maxSafeInt is I-JSON's largest integer every reader holds exactly
// (RFC 7493 2.2): 2^53-1.
const maxSafeInt = 1<<53 - 1

// appendInt writes an integer within ±(2^53-1) as a JSON number (its
// ECMAScript form is its decimal digits) and one beyond as a string of its
// decimal digits. As a number it would be written, hashed and read as the
// nearest double: an upstream's error_code of 2^60+1 would be recorded as
// 2^60, a value nobody observed. Object.Int follows the same rule.
func appendInt(b []byte, n int64) []byte {
	if n >= -maxSafeInt && n <= maxSafeInt {
		return strconv.AppendInt(b, n, 10)
	}
	b = append(b, '"')
	b = strconv.AppendInt(b, n, 10)
	return append(b, '"')
}

// appendUint is appendInt for an unsigned integer.
func appendUint(b []byte, n uint64) []byte {
	if n <= maxSafeInt {
		return strconv.AppendUint(b, n, 10)
	}
	b = append(b, '"')
	b = strconv.AppendUint(b, n, 10)
	return append(b, '"')
}

// appendNumber formats like ECMAScript (RFC 8785 3.2.2.3); a float64 is
// its own double, so nothing is rounded.
func appendNumber(b []byte, f float64) ([]byte, bool) {
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return b, false
	}
	return append(b, s...), true
}

func appendArray[T any](b []byte, xs []T, depth int) ([]byte, bool) {
	b = append(b, '[')
	for i, e := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendCanonical(b, e, depth+1); !ok {
			return b, false
		}
	}
	return append(b, ']'), true
}

func appendObject(b []byte, m map[string]any, depth int) ([]byte, bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if !utf8.ValidString(k) {
			return b, false
		}
		keys = append(keys, k)
	}
	// RFC 8785 sorts member names by their UTF-16 code units.
	slices.SortFunc(keys, compareUTF16)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCanonicalString(b, k)
		b = append(b, ':')
		var ok bool
		if b, ok = appendCanonical(b, m[k], depth+1); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// compareUTF16 orders strings by UTF-16 code units; for ASCII (the usual
// case) that is byte order, which is checked first.
func compareUTF16(a, b string) int {
	ascii := true
	for i := 0; i < len(a) && ascii; i++ {
		ascii = a[i] < utf8.RuneSelf
	}
	for i := 0; i < len(b) && ascii; i++ {
		ascii = b[i] < utf8.RuneSelf
	}
	if ascii {
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}
