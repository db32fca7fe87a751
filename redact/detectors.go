package redact

import (
	"math"
	"slices"
	"strings"
)

// A detector is one kind of value. The order is canonical: it is the order
// of Names, and it breaks ties between equally long matches at one place.
type detector uint8

const (
	detEmail detector = iota
	detPhone
	detCard
	detIBAN
	detSSN
	detAPIKey
	detJWT
	detIPv4
	numDetectors
)

var detectorNames = [numDetectors]string{
	detEmail:  "email",
	detPhone:  "phone",
	detCard:   "credit_card",
	detIBAN:   "iban",
	detSSN:    "ssn",
	detAPIKey: "api_key",
	detJWT:    "jwt",
	detIPv4:   "ipv4",
}

// Names returns the names of all detectors, in canonical order.
func Names() []string { return slices.Clone(detectorNames[:]) }

// Match ranks: at one start position and length, a value recognised by its
// own shape (sk-…, eyJ…) wins over one recognised only by the keyword in
// front of it, so "token=eyJ…" is reported as a jwt.
const (
	rankSpecific uint8 = iota
	rankKeyword
)

// Limits. They bound how far any detector looks, which is what bounds the
// text a Stream has to hold back (see MaxValueLen for the unbounded kinds).
const (
	maxDomain = 253 // RFC 1035 name length
	// maxLocal is far above RFC 5321's 64, and only there to bound the hold:
	// an address (local part, '@', domain, one byte after) fits MaxValueLen.
	maxLocal       = MaxValueLen - maxDomain - 2
	minCardDigits  = 13
	maxCardDigits  = 19
	minPhoneDigits = 8  // with the country code
	maxPhoneDigits = 15 // E.164
	minSecretLen   = 16 // shortest keyword-introduced secret
	minEntropy     = 3.5
	minJWTHeader   = 10 // "eyJhbGciOi" is the shortest realistic header prefix
)

// --- email -------------------------------------------------------------

// emails finds addresses from their '@', the one byte every address has.
// The local part is the whole run of local-part bytes before it: starting
// where the run starts, as every other value starts at a word boundary, is
// what keeps redaction idempotent (a value is never cut off from a neighbour
// it touches). A run longer than maxLocal is not taken for a local part, so
// a Stream never holds back more than MaxValueLen for an address.
func (sc *scanner) emails() {
	s := sc.s
	for i := sc.lo; i < sc.n; {
		k := strings.IndexByte(s[i:], '@')
		if k < 0 {
			break
		}
		a := i + k
		i = a + 1
		l := a
		for l > 0 && a-l <= maxLocal && class[s[l-1]]&cLocal != 0 {
			l--
		}
		if l == a || l < sc.lo || a-l > maxLocal {
			continue
		}
		sc.settle(l, sc.domainEnd(a+1), detEmail, rankSpecific, 0)
	}
	// The last run may still be followed by an '@'.
	if !sc.final {
		l := sc.n
		for l > sc.lo && sc.n-l <= maxLocal && class[s[l-1]]&cLocal != 0 {
			l--
		}
		if l < sc.n && sc.n-l <= maxLocal {
			sc.holdAt(l, detEmail, rankSpecific, 0)
		}
	}
}

// domainEnd returns the end of the longest domain at j: dot-separated
// non-empty labels, the last of at least two letters and not followed by a
// letter or digit; -1 if there is none.
func (sc *scanner) domainEnd(j int) int {
	best, start := -1, j
	dots, label, alpha := 0, 0, true
	for j-start < maxDomain {
		c := sc.at(j)
		if c == '.' {
			if label == 0 {
				break
			}
			dots, label, alpha = dots+1, 0, true
			j++
			continue
		}
		if class[c]&cDomain == 0 {
			break
		}
		label++
		if class[c]&(cUpper|cLower) == 0 {
			alpha = false
		}
		j++
		if dots > 0 && alpha && label >= 2 && !isAlnum(sc.at(j)) {
			best = j
		}
	}
	return best
}

// --- api_key -----------------------------------------------------------

// keys finds vendor keys. Each pass looks for a byte that is rare in prose
// ('-', '_', 'A') with the vectorised strings.IndexByte and checks the
// prefix around it; searching for "sk-" or "gh" directly would stop at
// every 's' or 'g' and cost several times more.
func (sc *scanner) keys() {
	s := sc.s
	// sk-… (OpenAI sk-, sk-proj-, sk-svcacct-; Anthropic sk-ant-) and
	// xoxa-/xoxb-/xoxp-/xoxr-/xoxs- (Slack).
	for q := range offsets(s, sc.lo, '-') {
		if p := q - 2; p >= sc.lo && s[p:q] == "sk" && keyStart(s, p) {
			sc.settle(p, sc.bodyEnd(q+1, cB64, 20, true), detAPIKey, rankSpecific, cB64)
		}
		if p := q - 4; p >= sc.lo && s[p:q-1] == "xox" && strings.IndexByte("abprs", s[q-1]) >= 0 && keyStart(s, p) {
			sc.settle(p, sc.bodyEnd(q+1, cSlack, 10, false), detAPIKey, rankSpecific, cSlack)
		}
	}
	sc.tailHold("sk-", detAPIKey, cB64)
	for _, prefix := range [...]string{"xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"} {
		sc.tailHold(prefix, detAPIKey, cSlack)
	}

	// ghp_/gho_/ghu_/ghs_/ghr_ and github_pat_ (GitHub).
	for q := range offsets(s, sc.lo, '_') {
		if p := q - 3; p >= sc.lo && s[p:p+2] == "gh" && strings.IndexByte("pousr", s[q-1]) >= 0 && keyStart(s, p) {
			sc.settle(p, sc.bodyEnd(q+1, cAlnum, 30, false), detAPIKey, rankSpecific, cAlnum)
		}
		if p := q - 6; p >= sc.lo && s[p:q] == "github" && keyStart(s, p) {
			end := -1
			if sc.at(q+1) == 'p' && sc.at(q+2) == 'a' && sc.at(q+3) == 't' && sc.at(q+4) == '_' {
				end = sc.bodyEnd(q+5, cWord, 22, false)
			}
			sc.settle(p, end, detAPIKey, rankSpecific, cWord)
		}
	}
	for _, prefix := range [...]string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"} {
		sc.tailHold(prefix, detAPIKey, cWord)
	}

	// AKIA/ASIA (AWS access key ids) and AIza (Google API keys).
	for p := range offsets(s, sc.lo, 'A') {
		if keyStart(s, p) {
			end, run := sc.awsGoogleAt(p)
			sc.settle(p, end, detAPIKey, rankSpecific, run)
		}
	}
}

// keyStart reports whether a key prefix at p starts a token: the byte before
// is not a letter, digit, '_' or '-'. Besides rejecting "task-…", this keeps
// the scan linear: a prefix inside another key's body (sk-sk-sk-…) would
// otherwise read the same run again.
func keyStart(s string, p int) bool { return class[before(s, p)]&cB64 == 0 }

func (sc *scanner) awsGoogleAt(p int) (int, uint16) {
	switch sc.at(p + 1) {
	case 'K', 'S':
		if sc.at(p+2) != 'I' || sc.at(p+3) != 'A' {
			return -1, 0
		}
		// Exactly 16 of [A-Z0-9]: read one byte more and no further, so the
		// answer never waits on a long run.
		j := p + 4
		for k := 0; k < 16; k++ {
			if class[sc.at(j+k)]&(cUpper|cDigit) == 0 {
				return -1, 0
			}
		}
		if isAlnum(sc.at(j + 16)) {
			return -1, 0
		}
		return j + 16, 0
	case 'I':
		if sc.at(p+2) != 'z' || sc.at(p+3) != 'a' {
			return -1, 0
		}
		return sc.bodyEnd(p+4, cB64, 35, false), cB64
	}
	return -1, 0
}

// bodyEnd returns the end of a key body of at least min bytes of class mask
// starting at j, or -1. mixed also asks for a digit and a letter, which
// tells a key from a hyphenated phrase such as "sk-learn-is-a-library…".
func (sc *scanner) bodyEnd(j int, mask uint16, min int, mixed bool) int {
	e := sc.runEnd(j, mask)
	if e-j < min || mixed && !hasDigitAndLetter(sc.s[j:e]) {
		return -1
	}
	return e
}

func hasDigitAndLetter(v string) bool {
	var seen uint16
	for i := 0; i < len(v); i++ {
		seen |= class[v[i]]
	}
	return seen&cDigit != 0 && seen&(cUpper|cLower) != 0
}

// secretKeywords introduce a secret value as "<keyword>: value" or
// "<keyword>=value". A keyword matches at the end of a longer name after '_'
// or '-', so OPENAI_API_KEY and x-auth-token count; all end in y, n, t or d,
// which lets most separators be rejected after one byte.
var secretKeywords = [...]string{
	"api_key", "apikey", "api-key", "access_key", "secret_key", "private_key",
	"token", "secret", "password", "passwd",
}

// keyed finds high-entropy values after "Bearer " or after a keyword and a
// separator. The match is the value only; the keyword stays readable.
func (sc *scanner) keyed() {
	s := sc.s
	// A value starts at most 4 bytes after its separator and 8 after
	// "Bearer", so separators just before lo can still introduce a value at lo.
	for _, sep := range [...]byte{':', '='} {
		for p := range offsets(s, max(0, sc.lo-4), sep) {
			if keywordBefore(s, p, sep) {
				sc.secretAt(p + 1)
			}
		}
	}
	// "Bearer" and "BEARER" from their rare capital, "bearer" whole.
	for p := range offsets(s, max(0, sc.lo-10), 'B') {
		sc.bearerAt(p)
	}
	for i := max(0, sc.lo-10); ; {
		k := strings.Index(s[i:], "bearer")
		if k < 0 {
			break
		}
		i += k + 1
		sc.bearerAt(i - 1)
	}
}

// bearerAt settles the value after "Bearer " at p, in any case.
func (sc *scanner) bearerAt(p int) {
	s := sc.s
	if len(s)-p < 6 || !strings.EqualFold(s[p:p+6], "bearer") || isAlnum(before(s, p)) {
		return
	}
	if sc.at(p+6) == ' ' {
		sc.secretAt(p + 6)
	}
	sc.unsure = false // "Bearer" at the very end: a value, if any, starts later
}

// keywordBefore reports whether a secret keyword ends just before the
// separator at p, allowing a closing quote and up to two spaces between, and
// a ':' before '=' (Go's :=).
func keywordBefore(s string, p int, sep byte) bool {
	k := p
	if sep == '=' && k > 0 && s[k-1] == ':' {
		k--
	}
	for n := 0; n < 2 && k > 0 && s[k-1] == ' '; n++ {
		k--
	}
	if k > 0 && (s[k-1] == '"' || s[k-1] == '\'') {
		k--
	}
	if k == 0 {
		return false
	}
	switch s[k-1] | 0x20 {
	case 'y', 'n', 't', 'd':
	default:
		return false
	}
	w := k
	for w > 0 && k-w < 64 && class[s[w-1]]&cB64 != 0 {
		w--
	}
	word := s[w:k]
	for _, kw := range secretKeywords {
		if len(word) < len(kw) || !strings.EqualFold(word[len(word)-len(kw):], kw) {
			continue
		}
		if len(word) == len(kw) {
			return true
		}
		if c := word[len(word)-len(kw)-1]; c == '_' || c == '-' {
			return true
		}
	}
	return false
}

// secretAt settles the value that follows a separator at j: up to two
// spaces, an optional quote, then a run of secret bytes, at least
// minSecretLen long, whose first secretSample bytes mix letters and digits
// and have high Shannon entropy. A run that fails only that test waits in
// pending (see keepPending).
func (sc *scanner) secretAt(j int) {
	for n := 0; n < 2 && sc.at(j) == ' '; n++ {
		j++
	}
	if c := sc.at(j); c == '"' || c == '\'' {
		j++
	}
	if j < sc.lo || j >= sc.n {
		// Before lo the value was settled in an earlier call; at the end of
		// a partial text it has not started yet.
		sc.unsure = false
		return
	}
	e := sc.secretEnd(j)
	v := sc.s[j:max(j, e)]
	switch {
	case len(v) < minSecretLen, sc.unsure && len(v) < secretSample:
		sc.settle(j, -1, detAPIKey, rankKeyword, cSecret) // too short, or not known yet
	case plausibleSecret(v[:min(len(v), secretSample)]):
		sc.settle(j, e, detAPIKey, rankKeyword, cSecret)
	default:
		sc.pending = append(sc.pending, pendingRun{start: j, end: e, open: sc.unsure})
		sc.unsure = false
	}
}

func plausibleSecret(v string) bool { return hasDigitAndLetter(v) && entropy(v) >= minEntropy }

// A pendingRun is a keyword-introduced run that failed the entropy test;
// open when it reaches the end of a partial text.
type pendingRun struct {
	start, end int
	open       bool
}

// keepPending takes a pending run after all when another value overlaps its
// first secretSample bytes. Entropy is not monotone: once the other value is
// replaced, the rest of the run could pass the test, and redacting the
// output again would find it; taking the whole run avoids that (and a run
// holding a detected value is worth hiding anyway). A value starting past
// the sample cannot change the sample, so it does not count; that bounds
// how long a Stream waits to reject a run.
//
// The decision is final only if the overlapping candidate is, so runs at or
// after the hold wait, and so does a run whose sample may still be
// overlapped, or whose end is not known yet.
func (sc *scanner) keepPending() {
	slices.SortFunc(sc.pending, func(a, b pendingRun) int { return a.start - b.start })
	n, k, maxEnd, added := len(sc.cands), 0, -1, false
runs:
	for _, p := range sc.pending {
		if p.start >= sc.hold {
			break
		}
		// Runs of one class that start in order also end in order, so the
		// limit only grows.
		window := min(p.end, p.start+secretSample)
		for limit := min(window, sc.hold); k < n && sc.cands[k].start < limit; k++ {
			maxEnd = max(maxEnd, sc.cands[k].end)
		}
		switch {
		case maxEnd > p.start && !p.open:
			sc.cands = append(sc.cands, match{start: p.start, end: p.end, det: detAPIKey, rank: rankKeyword})
			added = true
		case maxEnd > p.start, sc.hold < window:
			sc.holdAt(p.start, detAPIKey, rankKeyword, cSecret)
			break runs
		}
	}
	if added {
		sc.sort()
	}
}

// secretSample bounds the bytes a secret's entropy is measured on, so that
// keywords repeated inside one long value (token=token=…) cost a constant
// each and the scan stays linear.
const secretSample = 256

// secretEnd returns the end of the secret run at j, without the full stops
// that end a sentence. A run is read once: every start inside the last run
// read shares its end.
func (sc *scanner) secretEnd(j int) int {
	if j < sc.secretLo || j > sc.secretHi {
		e := sc.runEnd(j, cSecret)
		sc.secretLo, sc.secretHi, sc.secretUnsure = j, e, sc.unsure
		for e > j && sc.s[e-1] == '.' {
			e--
		}
		sc.secretTrim = e
	} else if sc.secretUnsure {
		sc.unsure = true
	}
	return sc.secretTrim
}

// entropy returns the Shannon entropy of v in bits per byte.
func entropy(v string) float64 {
	var counts [256]int
	for i := 0; i < len(v); i++ {
		counts[v[i]]++
	}
	n := float64(len(v))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// --- jwt ---------------------------------------------------------------

// jwts finds JSON Web Tokens by their header, which is base64url JSON and so
// always starts with "eyJ" ({"); the pass looks for the rare 'J'.
func (sc *scanner) jwts() {
	s := sc.s
	for q := range offsets(s, sc.lo, 'J') {
		if p := q - 2; p >= sc.lo && s[p:q] == "ey" && class[before(s, p)]&cJWT == 0 {
			sc.settle(p, sc.jwtAt(p), detJWT, rankSpecific, cJWT)
		}
	}
	sc.tailHold("eyJ", detJWT, cJWT)
}

// jwtAt accepts header.payload.signature (and the 5-part JWE form), or
// header.payload when both parts are JSON, as an unsigned token is.
func (sc *scanner) jwtAt(p int) int {
	e := sc.runEnd(p, cJWT)
	for e > p && sc.s[e-1] == '.' {
		e--
	}
	tok := sc.s[p:e]
	d1 := strings.IndexByte(tok, '.')
	if d1 < minJWTHeader {
		return -1
	}
	rest := tok[d1+1:]
	d2 := strings.IndexByte(rest, '.')
	switch {
	case d2 < 0 && strings.HasPrefix(rest, "eyJ"), d2 > 0:
		return e
	}
	return -1
}
