package redact

import (
	"iter"
	"slices"
	"strings"
)

// Character classes, one bit each, so that one table lookup answers "may this
// byte continue a local part / a JWT / a key body …".
const (
	cDigit   uint16 = 1 << iota
	cUpper          // A-Z
	cLower          // a-z
	cLocal          // email local part: alnum . _ % + -
	cDomain         // email domain label: alnum -
	cB64            // base64url: alnum _ - (sk-, AIza bodies; keyword letters)
	cJWT            // base64url and the segment dot
	cWord           // alnum _ (github_pat_ bodies)
	cSlack          // alnum - (xox… bodies)
	cSecret         // keyword-introduced values: base64, base64url, . ~
	cNumTrig        // bytes where a number-shaped value can start: digits + (

	cAlnum = cDigit | cUpper | cLower
)

var class = buildClasses()

func buildClasses() (t [256]uint16) {
	set := func(chars string, bits uint16) {
		for i := 0; i < len(chars); i++ {
			t[chars[i]] |= bits
		}
	}
	const all = cLocal | cDomain | cB64 | cJWT | cWord | cSlack | cSecret
	for c := '0'; c <= '9'; c++ {
		t[c] |= cDigit | cNumTrig | all
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] |= cUpper | all
		t[c+'a'-'A'] |= cLower | all
	}
	set(".", cLocal|cJWT|cSecret)
	set("-", cLocal|cDomain|cB64|cJWT|cSlack|cSecret)
	set("_", cLocal|cB64|cJWT|cWord|cSecret)
	set("%", cLocal)
	set("+", cLocal|cSecret|cNumTrig)
	set("/=~", cSecret)
	set("(", cNumTrig)
	return t
}

func isDigit(c byte) bool { return class[c]&cDigit != 0 }
func isAlnum(c byte) bool { return class[c]&cAlnum != 0 }

// load64 returns s[i:i+8] as a little-endian word; the compiler turns it
// into a single load.
func load64(s string, i int) uint64 {
	b := s[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// before returns the byte before s[i], or 0 at the start of s.
// offsets yields each offset of c in s from i on. Each pass of a detector
// looks for a byte that is rare in prose and checks what is around it,
// so the vectorised strings.IndexByte skips most of the text.
func offsets(s string, i int, c byte) iter.Seq[int] {
	return func(yield func(int) bool) {
		for {
			k := strings.IndexByte(s[i:], c)
			if k < 0 || !yield(i+k) {
				return
			}
			i += k + 1
		}
	}
}

func before(s string, i int) byte {
	if i > 0 {
		return s[i-1]
	}
	return 0
}

// A match is one candidate value, s[start:end].
type match struct {
	start, end int
	det        detector
	rank       uint8
}

// A scanner finds the candidate values of one text. It is also what makes
// streaming exact: every detector reads forward through at, which notes when
// the answer depends on bytes not received yet, and the detector then reports
// a hold instead of a match. Everything before the earliest hold is final.
type scanner struct {
	s     string
	n     int
	lo    int  // candidates start at s[lo:]; bytes before are context only
	final bool // s is the whole text; otherwise more may follow
	on    *[numDetectors]bool

	unsure bool // the current attempt read past the end of a partial text

	hold     int // earliest start whose outcome needs more text; n when none
	holdDet  detector
	holdRank uint8
	holdRun  uint16 // classes of the unbounded runs unsure at hold

	// The last secret run read (see secretEnd): s[secretLo:secretHi],
	// secretTrim without trailing dots, secretUnsure if it reached the end
	// of a partial text.
	secretLo, secretHi, secretTrim int
	secretUnsure                   bool

	cands   []match
	pending []pendingRun // keyword runs that failed the entropy test (keepPending)
}

func (sc *scanner) reset(s string, lo int, final bool, on *[numDetectors]bool) {
	sc.s, sc.n, sc.lo, sc.final, sc.on = s, len(s), lo, final, on
	sc.unsure = false
	sc.hold, sc.holdDet, sc.holdRank, sc.holdRun = len(s), 0, 0, 0
	sc.secretLo, sc.secretHi = -1, -2
	sc.cands, sc.pending = sc.cands[:0], sc.pending[:0]
}

// at returns s[j], or 0 past the end; past the end of a partial text it also
// marks the current attempt as unsure. 0 is in no class, so a detector sees
// the end of the text as a separator.
func (sc *scanner) at(j int) byte {
	if j < sc.n {
		return sc.s[j]
	}
	if !sc.final {
		sc.unsure = true
	}
	return 0
}

// runEnd returns the end of the run of bytes in class mask starting at j.
func (sc *scanner) runEnd(j int, mask uint16) int {
	for class[sc.at(j)]&mask != 0 {
		j++
	}
	return j
}

// digits reports whether s[j:j+k] are all digits.
func (sc *scanner) digits(j, k int) bool {
	for ; k > 0; k-- {
		if !isDigit(sc.at(j)) {
			return false
		}
		j++
	}
	return true
}

// settle closes one attempt at start: a match s[start:end] when end > start,
// or a hold when the attempt read past the end of a partial text. run names
// the class of an unbounded run (keys, JWTs), so that a Stream can drop the
// rest of an oversized one.
func (sc *scanner) settle(start, end int, d detector, rank uint8, run uint16) {
	if sc.unsure {
		sc.unsure = false
		sc.holdAt(start, d, rank, run)
		return
	}
	if end > start {
		sc.cands = append(sc.cands, match{start: start, end: end, det: d, rank: rank})
	}
}

func (sc *scanner) holdAt(p int, d detector, rank uint8, run uint16) {
	switch {
	case p < sc.hold:
		sc.hold, sc.holdDet, sc.holdRank, sc.holdRun = p, d, rank, run
	case p == sc.hold:
		sc.holdRun |= run
		if rank < sc.holdRank || rank == sc.holdRank && d < sc.holdDet {
			sc.holdDet, sc.holdRank = d, rank
		}
	}
}

// tailHold holds a proper prefix of prefix at the end of a partial text.
func (sc *scanner) tailHold(prefix string, d detector, run uint16) {
	if sc.final {
		return
	}
	for k := 1; k < len(prefix); k++ {
		p := sc.n - k
		if p >= sc.lo && sc.s[p:] == prefix[:k] && !isAlnum(before(sc.s, p)) {
			sc.holdAt(p, d, rankSpecific, run)
		}
	}
}

// scan collects the candidates of the enabled detectors, sorted by start,
// longest first, then by rank and canonical order.
func (sc *scanner) scan() {
	on := sc.on
	if on[detEmail] {
		sc.emails()
	}
	if on[detPhone] || on[detCard] || on[detIBAN] || on[detSSN] || on[detIPv4] {
		sc.numbers()
	}
	if on[detAPIKey] {
		sc.keys()
		sc.keyed()
	}
	if on[detJWT] {
		sc.jwts()
	}
	sc.sort()
	if len(sc.pending) > 0 {
		sc.keepPending()
	}
}

func (sc *scanner) sort() {
	if len(sc.cands) > 1 {
		slices.SortFunc(sc.cands, func(a, b match) int {
			switch {
			case a.start != b.start:
				return a.start - b.start
			case a.end != b.end:
				return b.end - a.end
			case a.rank != b.rank:
				return int(a.rank) - int(b.rank)
			}
			return int(a.det) - int(b.det)
		})
	}
}
