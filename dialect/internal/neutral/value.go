package neutral

import (
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// IsNull reports whether a raw member is absent or null.
func IsNull(v jsontext.Value) bool {
	return len(v) == 0 || v.Kind() == 'n'
}

// IsEmptyArray reports whether a raw member is an array without elements.
func IsEmptyArray(v jsontext.Value) bool {
	return v.Kind() == '[' && strings.TrimSpace(string(v[1:len(v)-1])) == ""
}

// IsBase64 checks the alphabet and the padding's place, so that the data:
// URL carries image data and nothing else.
func IsBase64(s string) bool {
	pad := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '=':
			pad++
		case pad > 0:
			return false
		case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/':
		default:
			return false
		}
	}
	return pad <= 2 && len(s)%4 == 0
}
