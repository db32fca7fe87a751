// Package redact finds personal data and secrets in text and replaces them,
// for the gateway's protocol.redaction settings (docs/reference.md,
// Configuration; docs/security.md, "Redaction covers every string"): in whole
// texts (String), in the string values of a JSON document (JSON), and in a
// text that arrives in chunks (Stream), where a value may be split across
// chunks.
//
// Detectors (Names): email, phone, credit_card (Luhn-checked), iban (mod-97
// checked), ssn, api_key (vendor prefixes, and high-entropy values after
// "Bearer " or a keyword such as api_key= or token:), jwt and ipv4.
//
// All detectors run in one scan with cheap prefilters, not one regular
// expression each: addresses are found from their '@', number-shaped values
// from the first digit of a run (eight bytes tested at a time) or '+' or '(',
// keys and tokens from a rare byte of their prefix ('-' of sk-, '_' of ghp_,
// 'J' of eyJ, ':' or '=' after a keyword) with the vectorised
// strings.IndexByte. Only there are the formats tried, with their checksums
// (Luhn, mod 97) and entropy. The cost is linear in the text, a couple of
// nanoseconds a byte on prose, whatever the input (TestLinearTime).
//
// Where two candidates overlap, the one that starts first wins (the longer
// one at the same start, then the more specific one); bytes of the other
// that stick out past the winner are replaced under the other's name, so no
// detected byte is ever left over. Every value starts and ends at a word
// boundary, and no detector looks into a neighbouring value, so redacting
// the output again finds nothing new (with a replacement like the default).
//
// A detected value never appears in an error or in a Result; a Result holds
// only counts per detector name.
package redact

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// DefaultReplacement is used when Config.Replacement is empty.
const DefaultReplacement = "[REDACTED:{detector}]"

// ErrUnknownDetector is wrapped by New's error for a name that is not a
// detector.
var ErrUnknownDetector = errors.New("unknown detector")

// Config is protocol.yaml's redaction: what a Redactor does, and what
// traffic the gateway redacts besides the answers.
type Config struct {
	// Detectors names the detectors to run (Names lists them all). Empty is
	// an error: empty means redaction is off, and then no Redactor is
	// built. An unknown or repeated name is an error.
	Detectors []string `yaml:"detectors"`
	// Replacement replaces each detected value, with "{detector}" replaced
	// by the detector's name. Empty means DefaultReplacement. A replacement
	// that begins and ends with a byte that is not a letter or digit (as the
	// default does) keeps redaction idempotent: redacting the output again
	// finds nothing new.
	Replacement string `yaml:"replacement"`
	// Block names detectors whose match blocks the text (Result.Blocked):
	// the caller withholds the answer instead of sending it masked. Each
	// must be one of the enabled detectors.
	Block []string `yaml:"block"`
	// ApplyTo are the SACP fields redacted in a protocol answer. Default:
	// every field.
	ApplyTo []string `yaml:"apply_to"`
	// Requests also redacts what agents send to the models.
	Requests bool `yaml:"requests"`
	// Messages also redacts agent-to-agent envelopes (POST /relay/messages):
	// the string values and member names of the payload and the error
	// text, both ways.
	// Default false: agents exchange what they sent.
	Messages bool `yaml:"messages"`
}

// A Redactor finds and replaces values. It is immutable once built and safe
// for concurrent use; build it once, at startup or config reload.
type Redactor struct {
	on    [numDetectors]bool
	block [numDetectors]bool
	repl  [numDetectors]string
	// scanners recycles the candidate buffers of String calls, which
	// keeps a call on clean text free of allocations.
	scanners sync.Pool
}

// New compiles cfg into a Redactor. It fails when Detectors is empty (an
// empty list means redaction is off: build no Redactor; Names() lists
// them all), or when a name in Detectors or Block is unknown, repeated, or
// (for Block) not enabled.
func New(cfg Config) (*Redactor, error) {
	r := &Redactor{}
	if len(cfg.Detectors) == 0 {
		return nil, errors.New("redact: no detectors: an empty list turns redaction off, and then no Redactor is built")
	}
	for _, name := range cfg.Detectors {
		d, ok := lookup(name)
		if !ok {
			return nil, fmt.Errorf("redact: detectors: %w %q (known: %s)", ErrUnknownDetector, name, strings.Join(detectorNames[:], ", "))
		}
		if r.on[d] {
			return nil, fmt.Errorf("redact: detectors: %q listed twice", name)
		}
		r.on[d] = true
	}
	for _, name := range cfg.Block {
		d, ok := lookup(name)
		switch {
		case !ok:
			return nil, fmt.Errorf("redact: block: %w %q (known: %s)", ErrUnknownDetector, name, strings.Join(detectorNames[:], ", "))
		case !r.on[d]:
			return nil, fmt.Errorf("redact: block: detector %q is not enabled", name)
		}
		r.block[d] = true
	}
	tmpl := cfg.Replacement
	if tmpl == "" {
		tmpl = DefaultReplacement
	}
	for d, name := range detectorNames {
		r.repl[d] = strings.ReplaceAll(tmpl, "{detector}", name)
	}
	return r, nil
}

func lookup(name string) (detector, bool) {
	for d, n := range detectorNames {
		if n == name {
			return detector(d), true
		}
	}
	return 0, false
}

// Result reports what a redaction found.
type Result struct {
	// Counts is the number of values replaced, per detector name; nil when
	// nothing was.
	Counts map[string]int
	// Blocked is the name of the first blocking detector that matched, ""
	// if none did.
	Blocked string
}

// Add adds o's counts to r and keeps r's Blocked if it has one.
func (r *Result) Add(o Result) {
	if r.Blocked == "" {
		r.Blocked = o.Blocked
	}
	for name, n := range o.Counts {
		if r.Counts == nil {
			r.Counts = make(map[string]int, len(o.Counts))
		}
		r.Counts[name] += n
	}
}

// Total returns the number of values replaced.
func (r Result) Total() int {
	t := 0
	for _, n := range r.Counts {
		t += n
	}
	return t
}

func (r *Result) count(d detector) {
	if r.Counts == nil {
		r.Counts = make(map[string]int, 2)
	}
	r.Counts[detectorNames[d]]++
}

// String returns s with every detected value replaced. A value of a
// blocking detector is replaced too, and named in Result.Blocked.
func (r *Redactor) String(s string) (string, Result) {
	var res Result
	out, _ := r.redact(s, &res)
	return out, res
}

// redact is String adding to res, so that JSON can total many strings
// without a map per string; changed reports whether anything was found.
func (r *Redactor) redact(s string, res *Result) (out string, changed bool) {
	sc, _ := r.scanners.Get().(*scanner)
	if sc == nil {
		sc = new(scanner)
	}
	defer r.putScanner(sc)
	sc.reset(s, 0, true, &r.on)
	sc.scan()
	if len(sc.cands) == 0 {
		return s, false
	}
	var b strings.Builder
	b.Grow(len(s) + 16*len(sc.cands))
	e := emitter{r: r, b: &b, res: res}
	e.segments(s, sc.cands, 0, len(s))
	b.WriteString(s[e.last:])
	return b.String(), true
}

func (r *Redactor) putScanner(sc *scanner) {
	sc.s = "" // do not pin the text while pooled
	r.scanners.Put(sc)
}

// An emitter writes the replaced form of a text, candidate by candidate.
type emitter struct {
	r   *Redactor
	b   *strings.Builder
	res *Result
	pos int // end of the text covered by replacements so far
	// last is the end of what has been written: text up to it is written,
	// as is or replaced.
	last int
}

// segments writes s[e.last:] up to the end of the last candidate that
// starts before limit, replacing the candidates; cands must be sorted.
// A candidate inside one already replaced is skipped; one that sticks out
// past it is replaced from there on, under its own name.
func (e *emitter) segments(s string, cands []match, from, limit int) {
	e.pos, e.last = from, from
	for _, c := range cands {
		if c.start >= limit {
			break
		}
		if e.r.block[c.det] && e.res.Blocked == "" {
			e.res.Blocked = detectorNames[c.det]
		}
		if c.end <= e.pos {
			continue
		}
		e.replace(s, max(c.start, e.pos), c.end, c.det)
	}
}

func (e *emitter) replace(s string, start, end int, d detector) {
	e.b.WriteString(s[e.last:start])
	e.b.WriteString(e.r.repl[d])
	e.res.count(d)
	e.pos, e.last = end, end
}
