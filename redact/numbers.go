package redact

import (
	"math/bits"
)

// Number-shaped detectors: phone, credit_card, iban, ssn, ipv4. They are
// tried only where such a value can start: at the first digit of a run
// (found eight bytes at a time, see nextDigit), at '+' and at '('.
//
// Boundaries look at the one byte on each side. A rule that looked further
// (say, "not after 1.") could see into a neighbouring value that gets
// redacted, and then redacting the output again would find something new.
// The one exception, ipv4 refusing to be followed by ".digit", is mirrored
// by no number starting right after a '.'.

func (sc *scanner) numbers() {
	s, on := sc.s, sc.on
	for i := sc.lo; ; {
		k := nextDigit(s, i)
		if k < 0 {
			break
		}
		for i = k + 1; i < len(s) && isDigit(s[i]); i++ {
		}
		p := before(s, k)
		switch {
		case isDigit(p):
			continue // a run that started before lo
		case class[p]&cUpper != 0:
			// Two capitals and a digit run: the start of an IBAN.
			if on[detIBAN] && k-2 >= sc.lo && class[s[k-2]]&cUpper != 0 && !isAlnum(before(s, k-2)) {
				sc.settle(k-2, sc.ibanAt(k-2), detIBAN, rankSpecific, 0)
			}
			continue
		case isAlnum(p) || p == '_':
			continue
		}
		if p == '.' {
			continue // part of a dotted sequence (1.2.3.4.5)
		}
		// Most numbers in prose (2024, 12.5%, 3400) fail every format on the
		// length of their first run and the byte after it; test that first.
		// At the end of a partial text that byte is unknown, so the formats
		// run and report a hold.
		run, next, known := i-k, byte(0), i < len(s)
		if known {
			next = s[i]
		}
		// After '-' a number is part of a longer identifier; an IP may
		// follow '-' (ranges).
		if p != '-' {
			if on[detCard] && s[k] >= '2' && s[k] <= '6' && (!known || run >= minCardDigits || next == ' ' || next == '-') {
				sc.settle(k, sc.cardAt(k), detCard, rankSpecific, 0)
			}
			if on[detPhone] && (!known || isPhoneSep(next)) {
				sc.settle(k, sc.phoneAt(k), detPhone, rankSpecific, 0)
			}
			if on[detSSN] && (!known || run == 3 && next == '-') {
				sc.settle(k, sc.ssnAt(k), detSSN, rankSpecific, 0)
			}
		}
		if on[detIPv4] && (!known || run <= 3 && next == '.') {
			sc.settle(k, sc.ipv4At(k), detIPv4, rankSpecific, 0)
		}
	}
	if on[detPhone] {
		for p := range offsets(s, sc.lo, '+') {
			sc.settle(p, sc.phoneIntl(p), detPhone, rankSpecific, 0)
		}
		for p := range offsets(s, sc.lo, '(') {
			sc.settle(p, sc.nanpParen(p), detPhone, rankSpecific, 0)
		}
	}
	// One or two capitals at the end of a partial text may begin an IBAN.
	if on[detIBAN] && !sc.final {
		for k := 1; k <= 2; k++ {
			p := sc.n - k
			if p < sc.lo || class[s[p]]&cUpper == 0 || isAlnum(before(s, p)) {
				continue
			}
			if k == 1 || class[s[p+1]]&cUpper != 0 {
				sc.holdAt(p, detIBAN, rankSpecific, 0)
			}
		}
	}
}

// nextDigit returns the index of the first ASCII digit in s[i:], or -1.
// It tests eight bytes at a time (SWAR): for a byte t below 0x80, t+0x50
// has its top bit set when t >= '0', and t+0x46 when t > '9'; bytes with
// the top bit set are not ASCII and masked out. That is three times faster
// than a byte loop on text with few digits, and digits are the only
// frequent trigger.
func nextDigit(s string, i int) int {
	const (
		low7 = 0x7f7f7f7f7f7f7f7f
		top  = 0x8080808080808080
	)
	for ; i+8 <= len(s); i += 8 {
		x := load64(s, i)
		t := x & low7
		if m := (t + 0x5050505050505050) &^ (t + 0x4646464646464646) &^ x & top; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i++ {
		if isDigit(s[i]) {
			return i
		}
	}
	return -1
}

// --- phone -------------------------------------------------------------

// phoneAt tries the national formats that start with a digit: North
// American (555-123-4567, 555.123.4567, 555 123 4567, with an optional
// leading 1) and trunk-prefixed ones (020 7946 0958, 06 12 34 56 78).
func (sc *scanner) phoneAt(i int) int {
	if sc.s[i] == '1' {
		if c := sc.at(i + 1); c == ' ' || c == '-' || c == '.' {
			e := -1
			if sc.at(i+2) == '(' {
				e = sc.nanpParen(i + 2)
			} else {
				e = sc.nanpCore(i + 2)
			}
			if e > 0 {
				return e
			}
		}
	}
	if e := sc.nanpCore(i); e > 0 {
		return e
	}
	if sc.s[i] == '0' {
		return sc.national(i)
	}
	return -1
}

func isPhoneSep(c byte) bool { return c == ' ' || c == '-' || c == '.' }

// nanpCore accepts ddd-ddd-dddd with '-', '.' or ' ' separators. With
// spaces the area code must start with 2-9, as real ones do, so that a row
// of figures such as "100 200 3000" is not taken for a phone.
func (sc *scanner) nanpCore(i int) int {
	if !sc.digits(i, 3) {
		return -1
	}
	s1 := sc.at(i + 3)
	if !isPhoneSep(s1) || s1 == ' ' && sc.s[i] < '2' {
		return -1
	}
	if !sc.digits(i+4, 3) || !isPhoneSep(sc.at(i+7)) || !sc.digits(i+8, 4) || isAlnum(sc.at(i+12)) {
		return -1
	}
	return i + 12
}

// nanpParen accepts (ddd) ddd-dddd, with the space and the separator
// optional.
func (sc *scanner) nanpParen(i int) int {
	if !sc.digits(i+1, 3) || sc.at(i+4) != ')' {
		return -1
	}
	j := i + 5
	if sc.at(j) == ' ' {
		j++
	}
	if !sc.digits(j, 3) {
		return -1
	}
	j += 3
	if isPhoneSep(sc.at(j)) {
		j++
	}
	if !sc.digits(j, 4) || isAlnum(sc.at(j+4)) {
		return -1
	}
	return j + 4
}

// phoneIntl accepts '+', a country code and groups separated by single
// spaces, dashes or dots, one group possibly in parentheses: 8 to 15 digits
// in all (E.164). It takes the longest such prefix, so a trailing number
// that would make it too long is left out rather than spoiling the match.
func (sc *scanner) phoneIntl(i int) int {
	j, total, best := i+1, 0, -1
	if !isDigit(sc.at(j)) {
		return -1
	}
	for {
		paren := sc.at(j) == '('
		if paren {
			j++
		}
		g := 0
		for isDigit(sc.at(j)) {
			j, g, total = j+1, g+1, total+1
			if total > maxPhoneDigits {
				return best
			}
		}
		if g == 0 {
			return best
		}
		if paren {
			if sc.at(j) != ')' {
				return best
			}
			j++
		} else if total >= minPhoneDigits && !isAlnum(sc.at(j)) {
			best = j
		}
		switch c := sc.at(j); {
		case isPhoneSep(c):
			if d := sc.at(j + 1); isDigit(d) || d == '(' {
				j++
				continue
			}
		case c == '(' || paren && isDigit(c):
			continue
		}
		return best
	}
}

// national accepts a trunk prefix 0 and groups of two or more digits
// separated by single spaces or dashes, 10 to 12 digits in all.
func (sc *scanner) national(i int) int {
	if c := sc.at(i + 1); c < '1' || c > '9' {
		return -1
	}
	j, total, groups, best := i, 0, 0, -1
	for {
		g := 0
		for isDigit(sc.at(j)) {
			j, g, total = j+1, g+1, total+1
			if total > 12 {
				return best
			}
		}
		if g < 2 {
			return best
		}
		groups++
		if groups >= 2 && total >= 10 && !isAlnum(sc.at(j)) {
			best = j
		}
		if c := sc.at(j); (c == ' ' || c == '-') && isDigit(sc.at(j+1)) {
			j++
			continue
		}
		return best
	}
}

// --- credit_card -------------------------------------------------------

// cardAt accepts 13 to 19 digits in groups separated by single spaces or
// dashes, starting with 2-6 (the networks in use) and passing the Luhn
// check. It takes the longest such prefix of the groups, so that a card
// number followed by its security code is still found.
func (sc *scanner) cardAt(i int) int {
	if c := sc.s[i]; c < '2' || c > '6' {
		return -1
	}
	var d [maxCardDigits]byte
	j, total, best := i, 0, -1
	for {
		for isDigit(sc.at(j)) {
			if total == maxCardDigits {
				return best
			}
			d[total] = sc.s[j] - '0'
			j, total = j+1, total+1
		}
		if total >= minCardDigits && !isAlnum(sc.at(j)) && luhn(d[:total]) {
			best = j
		}
		if c := sc.at(j); (c == ' ' || c == '-') && isDigit(sc.at(j+1)) {
			j++
			continue
		}
		return best
	}
}

// luhn reports whether the digits pass the Luhn (mod 10) check.
func luhn(d []byte) bool {
	sum := 0
	for k := 0; k < len(d); k++ {
		v := int(d[len(d)-1-k])
		if k%2 == 1 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

// --- ssn ---------------------------------------------------------------

// ssnAt accepts ddd-dd-dddd except numbers the SSA never issues: area 000,
// 666 or 9xx, group 00, serial 0000.
func (sc *scanner) ssnAt(i int) int {
	if !sc.digits(i, 3) || sc.at(i+3) != '-' || !sc.digits(i+4, 2) || sc.at(i+6) != '-' ||
		!sc.digits(i+7, 4) || isAlnum(sc.at(i+11)) {
		return -1
	}
	s := sc.s
	area, group, serial := s[i:i+3], s[i+4:i+6], s[i+7:i+11]
	if area == "000" || area == "666" || area[0] == '9' || group == "00" || serial == "0000" {
		return -1
	}
	return i + 11
}

// --- ipv4 --------------------------------------------------------------

// ipv4At accepts four dot-separated decimal octets of 1 to 3 digits, each at
// most 255, not followed by a letter, a digit or ".digit" (1.2.3.4.5).
func (sc *scanner) ipv4At(i int) int {
	j := i
	for k := 0; k < 4; k++ {
		if k > 0 {
			if sc.at(j) != '.' {
				return -1
			}
			j++
		}
		v, g := 0, 0
		for isDigit(sc.at(j)) {
			if g == 3 {
				return -1
			}
			v, j, g = v*10+int(sc.s[j]-'0'), j+1, g+1
		}
		if g == 0 || v > 255 {
			return -1
		}
	}
	if c := sc.at(j); isAlnum(c) || c == '.' && isDigit(sc.at(j+1)) {
		return -1
	}
	return j
}

// --- iban --------------------------------------------------------------

// ibanAt accepts an IBAN of a registered country at its registered length,
// compact or with single spaces between characters, whose check digits pass
// ISO 7064 mod 97-10 (ISO 13616).
func (sc *scanner) ibanAt(i int) int {
	length := ibanLength(sc.s[i], sc.s[i+1])
	if length == 0 || !isDigit(sc.at(i+3)) {
		return -1
	}
	var buf [34]byte
	j, k := i, 0
	for k < length {
		c := sc.at(j)
		if class[c]&(cUpper|cDigit) != 0 {
			buf[k] = c
			j, k = j+1, k+1
			continue
		}
		if c == ' ' && class[sc.at(j+1)]&(cUpper|cDigit) != 0 {
			j++
			continue
		}
		return -1
	}
	if isAlnum(sc.at(j)) || !ibanValid(buf[:length]) {
		return -1
	}
	return j
}

// ibanValid checks mod 97 over the rearranged IBAN (country and check
// digits moved to the end, letters as 10..35). Check digits 00, 01 and 99
// are never issued even where the remainder would fit.
func ibanValid(b []byte) bool {
	if c2, c3 := b[2], b[3]; c2 == '0' && (c3 == '0' || c3 == '1') || c2 == '9' && c3 == '9' {
		return false
	}
	r := 0
	for k := 0; k < len(b); k++ {
		c := b[(k+4)%len(b)]
		if isDigit(c) {
			r = (r*10 + int(c-'0')) % 97
		} else {
			r = (r*100 + int(c-'A') + 10) % 97
		}
	}
	return r == 1
}

func ibanLength(a, b byte) int {
	if a < 'A' || a > 'Z' || b < 'A' || b > 'Z' {
		return 0
	}
	return int(ibanLengths[int(a-'A')*26+int(b-'A')])
}

// ibanLengths holds the IBAN length of each country in the SWIFT IBAN
// registry, indexed by its two letters.
var ibanLengths = func() (t [26 * 26]uint8) {
	for _, e := range [...]struct {
		cc string
		n  uint8
	}{
		{"AD", 24}, {"AE", 23}, {"AL", 28}, {"AT", 20}, {"AZ", 28}, {"BA", 20}, {"BE", 16},
		{"BG", 22}, {"BH", 22}, {"BI", 27}, {"BR", 29}, {"BY", 28}, {"CH", 21}, {"CR", 22},
		{"CY", 28}, {"CZ", 24}, {"DE", 22}, {"DJ", 27}, {"DK", 18}, {"DO", 28}, {"EE", 20},
		{"EG", 29}, {"ES", 24}, {"FI", 18}, {"FK", 18}, {"FO", 18}, {"FR", 27}, {"GB", 22},
		{"GE", 22}, {"GI", 23}, {"GL", 18}, {"GR", 27}, {"GT", 28}, {"HN", 28}, {"HR", 21},
		{"HU", 28}, {"IE", 22}, {"IL", 23}, {"IQ", 23}, {"IS", 26}, {"IT", 27}, {"JO", 30},
		{"KW", 30}, {"KZ", 20}, {"LB", 28}, {"LC", 32}, {"LI", 21}, {"LT", 20}, {"LU", 20},
		{"LV", 21}, {"LY", 25}, {"MC", 27}, {"MD", 24}, {"ME", 22}, {"MK", 19}, {"MN", 20},
		{"MR", 27}, {"MT", 31}, {"MU", 30}, {"NI", 28}, {"NL", 18}, {"NO", 15}, {"OM", 23},
		{"PK", 24}, {"PL", 28}, {"PS", 29}, {"PT", 25}, {"QA", 29}, {"RO", 24}, {"RS", 22},
		{"RU", 33}, {"SA", 24}, {"SC", 31}, {"SD", 18}, {"SE", 24}, {"SI", 19}, {"SK", 24},
		{"SM", 27}, {"SO", 23}, {"ST", 25}, {"SV", 28}, {"TL", 23}, {"TN", 24}, {"TR", 26},
		{"UA", 29}, {"VA", 22}, {"VG", 24}, {"XK", 20}, {"YE", 30},
	} {
		t[int(e.cc[0]-'A')*26+int(e.cc[1]-'A')] = e.n
	}
	return t
}()
