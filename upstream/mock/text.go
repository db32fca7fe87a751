package mock

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// contentText flattens a message content (a string or an array of parts).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func tokens(chars int) int { return (chars + 3) / 4 }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}

// splitWords cuts s into pieces of n words, keeping the spaces, so that the
// concatenated pieces are exactly s.
func splitWords(s string, n int) []string {
	var out []string
	words, start := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			words++
			if words%n == 0 {
				out = append(out, s[start:i+1])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// schemaGen builds a deterministic JSON value from a JSON Schema: the
// arguments of the mock's tool calls (from a tool's parameters) and its
// response_format json_schema answers. The supported subset, which covers
// OpenAI's strict mode and what Pydantic and Zod emit:
//
//   - type (a name or a list: the first that is not "null"), or, without
//     type, the one its keywords imply (properties: object; items: array;
//     minimum: number; else string);
//   - const, then enum: its first value, or the value the user's message
//     gives for the property (see below) when it is one of them;
//   - objects: the required properties, in properties order, then required
//     names without a schema (from additionalProperties unless it is false),
//     then optional properties up to minProperties; additionalProperties
//     false is honoured since nothing undeclared is written;
//   - arrays: one element, or minItems, at most maxItems; prefixItems, then
//     items; nested deeper than 8 levels, as few as minItems allows, so
//     that recursive schemas end; with several elements each gets a
//     different value, for uniqueItems (not a format string, a const or a
//     one-value enum);
//   - strings: the word that follows the property's name in the user's
//     message ("city Paris", "city: Paris", "city is 'New York'"), else
//     "example"; a known format (date-time, date, time, email, uri,
//     hostname, ipv4, ipv6, uuid) gets a fixed valid sample instead;
//     minLength and maxLength are met by padding or cutting;
//   - numbers and integers: 1, moved into minimum/maximum (exclusive too)
//     and onto multipleOf; booleans: true; null: null;
//   - $ref to this document ("#", "#/$defs/x", "#/definitions/x"), with
//     sibling keywords; allOf, merged; anyOf and oneOf: their first branch
//     that is not just null (a oneOf whose branches overlap can then match
//     twice).
//
// Not supported, and ignored: pattern, patternProperties, propertyNames,
// dependentRequired/Schemas, if/then/else, not, contains, uniqueItems among
// objects, maxProperties, remote $refs, $anchor and $dynamicRef. The value

// isWordRune tells the runes of a name ("get_weather") from separators.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

// findWord is the byte offset of the first whole-word, case-insensitive
// occurrence of word in text at or after from, or -1.
func findWord(text, word string, from int) int {
	if word == "" {
		return -1
	}
	for i := from; i+len(word) <= len(text); i++ {
		if !utf8.RuneStart(text[i]) || !strings.EqualFold(text[i:i+len(word)], word) {
			continue
		}
		before, _ := utf8.DecodeLastRuneInString(text[:i])
		after, _ := utf8.DecodeRuneInString(text[i+len(word):])
		if (i == 0 || !isWordRune(before)) && (i+len(word) == len(text) || !isWordRune(after)) {
			return i
		}
	}
	return -1
}

// linkWords may sit between a property's name and its value in a message
// ("city is Paris", "unit to celsius", "city of Paris").
var linkWords = []string{"is", "are", "of", "as", "to", "equals"}

// wordAfter is the value a message gives for a property: the word after
// its name, past separators (":", "=") and link words, or the quoted text
// there; trailing punctuation is not part of it.
func wordAfter(text, name string) (string, bool) {
	for at := findWord(text, name, 0); at >= 0; at = findWord(text, name, at+1) {
		rest := text[at+len(name):]
		for {
			rest = strings.TrimLeft(rest, " \t\r\n:=")
			f, tail, _ := strings.Cut(rest, " ")
			if slices.Contains(linkWords, strings.ToLower(f)) && tail != "" {
				rest = tail
				continue
			}
			break
		}
		if rest != "" && (rest[0] == '"' || rest[0] == '\'') {
			if end := strings.IndexByte(rest[1:], rest[0]); end > 0 {
				return rest[1 : 1+end], true
			}
		}
		f, _, _ := strings.Cut(rest, " ")
		f, _, _ = strings.Cut(f, "\n")
		if f = strings.TrimRight(f, ".,;:!?)\"'"); f != "" {
			return f, true
		}
	}
	return "", false
}
