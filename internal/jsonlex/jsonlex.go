// Package jsonlex is the gateway's one set of JSON lexical rules: where
// whitespace ends, what a string token is (its escapes, its UTF-8), what a
// number is, and how a string's contents decode. The hand-written readers
// of the gateway (the SACP validator, compact SACP, the agent envelopes and
// the redactor) each build their own structure in one pass over their
// input, for speed and for error messages of their own, but they take every
// token from here, so no two of them can disagree about one.
//
// The rules are RFC 8259's, strictly, as internal/strictjson's jsontext
// reads them: a string holds valid UTF-8 only, no control character, no
// escape other than \" \\ \/ \b \f \n \r \t \uXXXX, and no \u escape of an
// unpaired surrogate. Readers that accepted more (encoding/json coerces
// invalid UTF-8 and lone surrogates to U+FFFD) let a validator read one
// string while a client read another.
//
// Every function takes the input and an offset and returns the offset
// after what it read; they work on string and []byte alike and do not
// allocate, except the Append functions' growth of dst.
package jsonlex

import (
	"bytes"
	"math/bits"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Text is the input of the lexer: a document as a string or as bytes.
type Text interface{ ~string | ~[]byte }

// Kind says why a token was refused.
type Kind uint8

// The kinds of lexical errors. Off in an Error is where each is found.
const (
	// EOF: the input ended inside a token (Off: its length).
	EOF Kind = iota + 1
	// Control: a control character (below U+0020) in a string (Off: it).
	Control
	// BadEscape: a backslash followed by a character that starts no
	// escape (Off: the backslash).
	BadEscape
	// BadUnicodeEscape: \u not followed by four hex digits (Off: the
	// backslash).
	BadUnicodeEscape
	// Surrogate: a \u escape of a surrogate that is not half of a pair
	// (Off: the backslash of the unpaired escape).
	Surrogate
	// BadUTF8: a byte sequence in a string that is not UTF-8 (Off: its
	// first byte).
	BadUTF8
	// NoIntDigit: a number without a digit where its integer part starts
	// ("-", "-x"; Off: where the digit should be).
	NoIntDigit
	// LeadingZero: an integer part of several digits starting with 0 (Off:
	// the digit after the 0).
	LeadingZero
	// NoFracDigit: no digit after a number's decimal point (Off: where the
	// digit should be).
	NoFracDigit
	// NoExpDigit: no digit in a number's exponent (Off: where the digit
	// should be).
	NoExpDigit
	// BadLiteral: not the literal true, false or null that its first
	// letter started (Off: the first byte that differs).
	BadLiteral
)

// Error is a refused token: why, and at which offset of the input.
type Error struct {
	Kind Kind
	Off  int
}

var kindText = [...]string{
	EOF:              "unexpected end of input",
	Control:          "control character in string",
	BadEscape:        "invalid escape",
	BadUnicodeEscape: `invalid \u escape`,
	Surrogate:        "unpaired surrogate escape",
	BadUTF8:          "invalid UTF-8 in string",
	NoIntDigit:       "invalid number",
	LeadingZero:      "invalid number: leading zero",
	NoFracDigit:      "invalid number: no digits after '.'",
	NoExpDigit:       "invalid number: no digits in exponent",
	BadLiteral:       "invalid literal",
}

// String is a short English description of the kind, for readers that
// have no wording of their own.
func (k Kind) String() string {
	if int(k) < len(kindText) && kindText[k] != "" {
		return kindText[k]
	}
	return "invalid JSON"
}

// Space returns the offset of the first byte at or after i that is not
// JSON whitespace (space, tab, line feed, carriage return).
func Space[T Text](d T, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Constants of the eight-bytes-at-a-time test in String, the classic SWAR
// tests: (x - ones) &^ x & highs is non-zero iff some byte of x is zero,
// and (x - n*ones) &^ x & highs iff some byte is below n (exact as a
// yes/no answer). XOR with c*ones turns "byte == c" into "byte is zero";
// the high bits of x itself flag non-ASCII bytes.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// load8 is the eight bytes at d[i:] as a little-endian word.
func load8[T Text](d T, i int) uint64 {
	b := d[i : i+8] // one bounds check for the eight reads
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// String reads the string token that starts at d[i] (which must be '"')
// and returns the offset after its closing quote, and whether its contents
// hold an escape (without one, d[i+1:end-1] is already the decoded string).
func String[T Text](d T, i int) (end int, escaped bool, err *Error) {
	i++
	for {
		// Most of a document is string contents: skip eight plain bytes
		// (printable ASCII other than '"' and '\') at a time, then look
		// at the rest one by one. The test is written out here: as a
		// function it is over the inlining budget, and the call costs as
		// much as the test.
		for i+8 <= len(d) {
			w := load8(d, i)
			q, bs := w^(ones*'"'), w^(ones*'\\')
			if m := ((w-ones*0x20)&^w | (q-ones)&^q | (bs-ones)&^bs | w) & highs; m != 0 {
				// The lowest flag is exact (a false one only ever sits
				// above a true one): go straight to that byte, so that
				// the block is not tested again at every byte before it.
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(d) {
			return i, escaped, &Error{EOF, len(d)}
		}
		c := d[i]
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			n, e := escape(d, i)
			if e != nil {
				return i, escaped, e
			}
			i += n
		case c < 0x20:
			return i, escaped, &Error{Control, i}
		case c < utf8.RuneSelf:
			i++
		default:
			n := runeLen(d, i)
			if n == 0 {
				return i, escaped, &Error{BadUTF8, i}
			}
			if n < 0 { // a rune cut off by the end of the input
				return i, escaped, &Error{EOF, len(d)}
			}
			i += n
		}
	}
}

// escape checks the escape sequence at d[i] (a backslash) and returns its
// length: 2, 6, or 12 for a surrogate pair.
func escape[T Text](d T, i int) (int, *Error) {
	if i+1 >= len(d) {
		return 0, &Error{EOF, len(d)}
	}
	switch d[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
	default:
		return 0, &Error{BadEscape, i}
	}
	r, err := unicodeEscape(d, i)
	if err != nil {
		return 0, err
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, &Error{Surrogate, i}
	case r >= 0xD800 && r <= 0xDBFF:
		j := i + 6
		if j+1 >= len(d) || d[j] != '\\' || d[j+1] != 'u' {
			if j+1 >= len(d) && (j >= len(d) || d[j] == '\\') {
				return 0, &Error{EOF, len(d)}
			}
			return 0, &Error{Surrogate, i}
		}
		lo, err := unicodeEscape(d, j)
		if err != nil {
			return 0, err
		}
		if lo < 0xDC00 || lo > 0xDFFF {
			return 0, &Error{Surrogate, i}
		}
		return 12, nil
	}
	return 6, nil
}

// unicodeEscape decodes the four hex digits of the \u escape at d[i] (the
// backslash). Digits cut short by the end of the input are EOF, not a bad
// escape.
func unicodeEscape[T Text](d T, i int) (rune, *Error) {
	if r, ok := hex4(d, i+2); ok {
		return r, nil
	}
	for k := i + 2; k < i+6 && k < len(d); k++ {
		if hexVal(d[k]) < 0 {
			return 0, &Error{BadUnicodeEscape, i}
		}
	}
	return 0, &Error{EOF, len(d)}
}

// hex4 decodes the four hex digits at d[i:].
func hex4[T Text](d T, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for k := i; k < i+4; k++ {
		v := hexVal(d[k])
		if v < 0 {
			return 0, false
		}
		r = r<<4 | v
	}
	return r, true
}

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

// runeLen returns the length of the UTF-8 encoded rune at d[i] (not
// ASCII), 0 when the bytes there are not UTF-8 (a bad lead or continuation
// byte, an overlong form, a surrogate or a value past U+10FFFF), or -1 when
// they begin one that the end of the input cuts off. It follows
// utf8.DecodeRune's rules on both input types without converting them.
func runeLen[T Text](d T, i int) int {
	c := d[i]
	var n int
	var lo, hi byte = 0x80, 0xBF // the range of the second byte
	switch {
	case c >= 0xC2 && c <= 0xDF:
		n = 2
	case c == 0xE0:
		n, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		n = 3
	case c == 0xED:
		n, hi = 3, 0x9F // no surrogates
	case c == 0xF0:
		n, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		n = 4
	case c == 0xF4:
		n, hi = 4, 0x8F // nothing past U+10FFFF
	default:
		return 0
	}
	for k := i + 1; k < i+n; k++ {
		if k >= len(d) {
			return -1
		}
		b, l, h := d[k], byte(0x80), byte(0xBF)
		if k == i+1 {
			l, h = lo, hi
		}
		if b < l || b > h {
			return 0
		}
	}
	return n
}

// Number reads the number token that starts at d[i] (a '-' or a digit)
// and returns the offset after it. What follows it is not looked at: "01"
// is refused here (LeadingZero), "1x" is the number 1 followed by x.
func Number[T Text](d T, i int) (end int, err *Error) {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d):
		return i, &Error{EOF, len(d)}
	case d[i] == '0':
		i++
		if i < len(d) && isDigit(d[i]) {
			return i, &Error{LeadingZero, i}
		}
	case isDigit(d[i]):
		i = digits(d, i)
	default:
		return i, &Error{NoIntDigit, i}
	}
	if i < len(d) && d[i] == '.' {
		if i, err = someDigits(d, i+1, NoFracDigit); err != nil {
			return i, err
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		return someDigits(d, i, NoExpDigit)
	}
	return i, nil
}

// someDigits reads the digits at d[i] of a fraction or an exponent, which
// has at least one (none: the error of kind none).
func someDigits[T Text](d T, i int, none Kind) (int, *Error) {
	if i >= len(d) {
		return i, &Error{EOF, len(d)}
	}
	if !isDigit(d[i]) {
		return i, &Error{none, i}
	}
	return digits(d, i), nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digits[T Text](d T, i int) int {
	for i < len(d) && isDigit(d[i]) {
		i++
	}
	return i
}

// Word is the literal a value that starts with c must be: "true", "false"
// or "null"; "" for any other c.
func Word(c byte) string {
	switch c {
	case 't':
		return "true"
	case 'f':
		return "false"
	case 'n':
		return "null"
	}
	return ""
}

// Literal reads the literal lit ("true", "false" or "null") at d[i] and
// returns the offset after it.
func Literal[T Text](d T, i int, lit string) (end int, err *Error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(d) {
			return i + k, &Error{EOF, len(d)}
		}
		if d[i+k] != lit[k] {
			return i + k, &Error{BadLiteral, i + k}
		}
	}
	return i + len(lit), nil
}

// AppendUnquoted appends the decoded contents of a string token to dst:
// s is what String accepted between the quotes.
func AppendUnquoted[T Text](dst []byte, s T) []byte {
	for i := 0; i < len(s); {
		// Copy the run up to the next escape in one append.
		j := len(s)
		if k := indexBackslash(s[i:]); k >= 0 {
			j = i + k
		}
		dst = append(dst, s[i:j]...)
		if j >= len(s) {
			break
		}
		switch e := s[j+1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(s, j+2)
			if r >= 0xD800 && r <= 0xDBFF {
				lo, _ := hex4(s, j+8)
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				j += 6
			}
			dst = utf8.AppendRune(dst, r)
			i = j + 6
			continue
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		i = j + 2
	}
	return dst
}

// indexBackslash is the index of the first backslash in s, or -1: the
// vectorised search of the strings and bytes packages for the two types
// the gateway uses, eight bytes at a time otherwise.
func indexBackslash[T Text](s T) int {
	switch v := any(s).(type) {
	case string:
		return strings.IndexByte(v, '\\')
	case []byte:
		return bytes.IndexByte(v, '\\')
	}
	j := 0
	for j+8 <= len(s) {
		if bs := load8(s, j) ^ (ones * '\\'); (bs-ones)&^bs&highs != 0 {
			break
		}
		j += 8
	}
	for ; j < len(s); j++ {
		if s[j] == '\\' {
			return j
		}
	}
	return -1
}

// Unquote returns the decoded contents of a string token (s is what
// String accepted between the quotes; escaped is what it reported).
func Unquote[T Text](s T, escaped bool) string {
	if !escaped {
		return string(s)
	}
	b := AppendUnquoted(make([]byte, 0, len(s)), s)
	// The one allocation of a decoded string, as strings.Builder makes
	// it: b is not kept or changed after this.
	return unsafe.String(unsafe.SliceData(b), len(b))
}
