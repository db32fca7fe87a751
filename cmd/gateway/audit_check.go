package main

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/confkit"
)

// loadPubkeys reads the --pubkey files of cmd; false when one is not a key
// (the problem is printed).
func loadPubkeys(cmd string, files []string, stderr io.Writer) ([]ed25519.PublicKey, bool) {
	keys := make([]ed25519.PublicKey, 0, len(files))
	for _, f := range files {
		pub, err := audit.LoadPublicKey(f)
		if err != nil {
			fmt.Fprintf(stderr, "gateway audit %s: --pubkey: %v\n", cmd, err)
			return nil, false
		}
		keys = append(keys, pub)
	}
	return keys, true
}

// auditVerifyExport is `gateway audit verify --export FILE`: the auditor's
// check of an export and its manifest, without the gateway's directory.
func auditVerifyExport(file, manifest string, pubFiles []string, asJSON bool, stdout, stderr io.Writer) int {
	if manifest == "" {
		manifest = file + ".manifest.json"
	}
	for _, fp := range [][2]string{{"--export", file}, {"--manifest", manifest}} { // in this order: the export first
		flag, path := fp[0], fp[1]
		if fi, err := os.Stat(path); err != nil || fi.IsDir() {
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(stderr, "gateway audit verify: %s %s: no such file\n", flag, path)
			} else {
				fmt.Fprintf(stderr, "gateway audit verify: %s %s: %v\n", flag, path, err)
			}
			return exitUsage
		}
	}
	keys, ok := loadPubkeys("verify", pubFiles, stderr)
	if !ok {
		return exitUsage
	}
	pl := progressFor(stderr)
	rep, err := audit.VerifyExport(file, manifest, audit.Options{Keys: keys, Progress: pl.fn()})
	pl.done()
	if verifyFailed(err, stderr) {
		return exitFailed
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return exitOK
	}
	fmt.Fprintln(stdout, exportSummary(rep))
	return exitOK
}

// exportSummary is the one-line result of a successful verify --export:
// what the export was found to be, chain by chain, and how far each is
// tied to a (signed) checkpoint.
func exportSummary(rep audit.ExportReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ok: %s matches its manifest: %d entries (%s, sha256 %s)", rep.File, rep.Entries, rep.Format, rep.SHA256)
	for _, c := range rep.Chains {
		if c.Count == 0 {
			continue
		}
		fmt.Fprintf(&b, "; %s: ", c.Chain)
		if c.Contiguous {
			fmt.Fprintf(&b, "seq %d to %d, every link checked", c.FirstSeq, c.LastSeq)
		} else {
			fmt.Fprintf(&b, "%d entries from seq %d to %d (not contiguous: links checked where seqs follow)", c.Count, c.FirstSeq, c.LastSeq)
		}
		switch cp := c.Checkpoint; {
		case cp == nil:
			b.WriteString(", no checkpoint")
		case c.CheckpointInExport:
			fmt.Fprintf(&b, ", checkpoint seq %d in the export", cp.Seq)
		default:
			fmt.Fprintf(&b, ", checkpoint seq %d not in the export (it does not cover these entries)", cp.Seq)
		}
		switch {
		case c.Checkpoint == nil:
		case c.SignaturesChecked:
			fmt.Fprintf(&b, ", signature ok (key id %s)", c.Checkpoint.KeyID)
		case c.Checkpoint.Signature == "":
			b.WriteString(", unsigned")
		default:
			b.WriteString(", signature not checked (no --pubkey)")
		}
		if c.VerifiedFrom != nil {
			fmt.Fprintf(&b, "; the gateway verified the chain from checkpoint seq %d", c.VerifiedFrom.Seq)
		}
	}
	return b.String()
}

// checkKind turns a --kind that selects nothing the gateway writes into a
// usage error, with the nearest kind when it looks like a typo: an export
// of a misspelt kind is otherwise empty, and looks like "nothing
// happened".
func checkKind(kind string) error {
	if kind == "" || audit.KnownKind(kind) {
		return nil
	}
	return fmt.Errorf("--kind %q: the gateway writes no such kind%s; the kinds are %s (a trailing * matches a prefix, as in llm.*)",
		kind, confkit.DidYouMean(kind, audit.KindPatterns()), strings.Join(audit.Kinds(), ", "))
}

// verifiedSummary says how the export's chains were verified.
func verifiedSummary(m audit.Manifest) string {
	var parts []string
	for _, c := range m.Chains {
		from := "seq 1"
		if c.VerifiedFrom != nil {
			from = fmt.Sprintf("signed checkpoint seq %d", c.VerifiedFrom.Seq)
		}
		sig := "signatures not checked"
		if c.SignaturesChecked {
			sig = "signatures checked"
		}
		parts = append(parts, fmt.Sprintf("%s from %s (%d entries, %s)", c.Chain, from, c.EntriesVerified, sig))
	}
	if len(parts) == 0 {
		return "no chain"
	}
	return strings.Join(parts, ", ")
}

// windowHint is what a --since export without a key is told: a key lets
// it start at a signed checkpoint instead of at seq 1.
func windowHint(f audit.Filter, keys []ed25519.PublicKey) string {
	if f.Since.IsZero() || len(keys) > 0 {
		return ""
	}
	return " (with --pubkey, --since verifies from the last signed checkpoint before it)"
}

// progressLine shows a verify's or an export's progress on a terminal: one
// line rewritten in place, a few times a second. Its methods do nothing
// on a nil *progressLine, which is what progressFor returns when stderr is
// not a terminal (a pipe, a file, a CI log), where such a line is noise.
type progressLine struct {
	w          io.Writer
	stage      string
	start, at  time.Time
	wroteSince bool
}

// progressEvery is how often the line is rewritten at most.
const progressEvery = 200 * time.Millisecond

func progressFor(stderr io.Writer) *progressLine {
	if !isTerminal(stderr) {
		return nil
	}
	return &progressLine{w: stderr}
}

// isTerminal reports whether w is a terminal. A character device is taken
// for one: /dev/null is one too, and writing the line there costs nothing.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// fn is the Options.Progress of p: nil when there is no line to show.
func (p *progressLine) fn() func(audit.Progress) {
	if p == nil {
		return nil
	}
	return p.report
}

func (p *progressLine) report(pr audit.Progress) {
	now := time.Now()
	if pr.Stage != p.stage {
		p.stage, p.start, p.at = pr.Stage, now, time.Time{}
	}
	if now.Sub(p.at) < progressEvery {
		return
	}
	p.at = now
	rate := 0.0
	if s := now.Sub(p.start).Seconds(); s > 0 {
		rate = float64(pr.Entries) / s
	}
	where := pr.File
	if pr.Chain != "" {
		where = pr.Chain + " " + pr.File
	}
	// \r and "erase line": the next report, or done, overwrites it.
	fmt.Fprintf(p.w, "\r\x1b[K%s: %d entries, %.0f entries/s, %s", pr.Stage, pr.Entries, rate, where)
	p.wroteSince = true
}

// done erases the line, so the summary or the failure that follows starts
// a clean line.
func (p *progressLine) done() {
	if p != nil && p.wroteSince {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
