package audit

import (
	"crypto/ed25519"
	"time"
)

// Options are the optional parts of VerifyWith, Export and VerifyExport.
type Options struct {
	// Keys check checkpoint signatures, as Verify's keys do.
	Keys []ed25519.PublicKey
	// Since, with Keys, starts each chain at its last signed checkpoint
	// written before Since instead of at seq 1: that checkpoint's
	// signature, and every entry from it to the chain's end, are
	// verified; what lies before it is not read. It is what an export of
	// the entries since a time needs, at the cost of the recent part only.
	// Without Keys (no signature to start from) chains are verified from
	// seq 1.
	Since time.Time
	// Progress, when set, is called as the work goes on: at each file and
	// every progressEvery entries, from the calling goroutine.
	Progress func(Progress)
}

// Progress is how far a verify or an export has got.
type Progress struct {
	Stage   string // "verify", "export" or "check export"
	Chain   string // "" while checking an export
	File    string // the segment or export file being read
	Entries int64  // entries read so far in this stage, all chains
}

// progressEvery is how many entries pass between two Progress calls
// within a file: often enough for a line updated a few times a second,
// rarely enough to cost nothing.
const progressEvery = 4096

// progress counts entries for an Options.Progress; the zero value and nil
// report nothing.
type progress struct {
	fn  func(Progress)
	cur Progress
}

func newProgress(fn func(Progress), stage string) *progress {
	return &progress{fn: fn, cur: Progress{Stage: stage}}
}

// at reports that chain's file is being read now.
func (p *progress) at(chain, file string) {
	if p == nil || p.fn == nil {
		return
	}
	p.cur.Chain, p.cur.File = chain, file
	p.fn(p.cur)
}

// step counts one entry.
func (p *progress) step() {
	if p == nil || p.fn == nil {
		return
	}
	p.cur.Entries++
	if p.cur.Entries%progressEvery == 0 {
		p.fn(p.cur)
	}
}
