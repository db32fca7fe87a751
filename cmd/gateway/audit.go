package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
)

// defaultAuditDir is the audit directory when neither --dir nor a config
// directory names one.
const defaultAuditDir = "data/audit"

const auditUsage = `usage:
  gateway audit verify [--config DIR] [--dir D] [--pubkey FILE]... [--json]
  gateway audit verify --export FILE [--manifest M] [--pubkey FILE]... [--json]
  gateway audit verify --from s3://BUCKET/PREFIX [--config DIR] [--pubkey FILE]... [--json]
  gateway audit export [--config DIR] [--dir D | --from s3://BUCKET/PREFIX] --format jsonl|csv [--since T] [--until T] [--agent ID] [--kind K] [--pubkey FILE]... --out FILE|-
  gateway audit keygen --out PREFIX | --private FILE --public FILE
  gateway audit prove [--config DIR] [--dir D] [--chain C] --seq N [--checkpoint FILE] [--out FILE|-]
  gateway audit prove [--config DIR] [--dir D] [--out FILE|-] --consistency OLD NEW
  gateway audit checkpoint [--config DIR] [--dir D] [--chain C] [--size N] [--out FILE|-]
  gateway audit verify-proof --pubkey FILE [--pubkey FILE]... [--json] PROOF

D defaults to the audit.dir of DIR/gateway.yaml (DIR: config), or data/audit
without a config directory. --pubkey may be given once per signing key the
trail has used. verify --export checks an export and its manifest (M defaults
to FILE.manifest.json) as an auditor receives them. --from reads every chain
shipped to object storage (audit.ship), with the storage settings of DIR's
audit.ship or, without one, AWS_ENDPOINT_URL(_S3), AWS_REGION and the
AWS_ACCESS_KEY_ID family. --out - writes the entries
to stdout, the summary and the manifest to stderr. T is an RFC 3339 time, a
date (UTC) or a duration ago (24h). With --pubkey, export checks signatures
too, and --since verifies each chain from its last signed checkpoint before T. On a terminal, verify and export show their progress.
Exit codes: 0 ok, 1 a check failed, 2 usage error.
`

// auditMain runs `gateway audit ...`; args are the arguments after "audit".
// It returns the process exit code: 0 ok, 1 a check failed, 2 usage error.
func auditMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, auditUsage)
		return exitUsage
	}
	if args[0] == "help" || isHelp(args[0]) {
		fmt.Fprint(stdout, auditUsage)
		return exitOK
	}
	// The command table is the one list of audit's subcommands.
	if c, rest, ok := lookup(append([]string{"audit"}, args...)); ok {
		return c.run(rest, stdout, stderr)
	}
	fmt.Fprintf(stderr, "gateway audit: unknown command %q (want verify, export, keygen, prove, checkpoint or verify-proof)\n", args[0])
	return exitUsage
}

// auditDirOf fills *dir when --dir was not given: the audit.dir of the
// configuration in cfgDir (relative paths there are relative to it), or
// data/audit when the default configuration directory does not exist.
func auditDirOf(cmd string, dir *string, flags *flag.FlagSet, cfgDir string, stderr io.Writer) bool {
	if *dir != "" {
		return true
	}
	explicit := false
	flags.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "config" })
	if cfgDir == "" {
		// No configuration was given or found by the search (the
		// dispatcher passes what it found as --config).
		cfgDir, explicit = "config", false
	}
	if _, err := os.Stat(cfgDir); err != nil && !explicit {
		*dir = defaultAuditDir
		return true
	}
	cfg, err := config.Load(cfgDir)
	if err != nil {
		fmt.Fprintf(stderr, "gateway audit %s: --config %s:\n", cmd, cfgDir)
		reportConfig(stderr, err)
		return false
	}
	*dir = cfg.Gateway.Audit.Dir
	return true
}

// checkDir turns a missing or unreadable --dir into a usage error.
func checkDir(cmd, dir string, stderr io.Writer) bool {
	fi, err := os.Stat(dir)
	if err == nil && fi.IsDir() {
		return true
	}
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "gateway audit %s: --dir %s: no such directory\n", cmd, dir)
	} else {
		fmt.Fprintf(stderr, "gateway audit %s: --dir %s: %v\n", cmd, dir, err)
	}
	return false
}

func auditVerify(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("audit verify", stderr)
	dir := flags.String("dir", "", "audit directory (default: the configuration's audit.dir)")
	cfgDir := flags.String("config", "", "configuration directory whose gateway.yaml names the audit dir "+configDefault+"; with none found, data/audit")
	var pubFiles []string
	flags.Func("pubkey", "ed25519 public key (PEM) to check checkpoint signatures with; repeat it for each key the trail was signed with (after a key rotation)", func(f string) error {
		pubFiles = append(pubFiles, f)
		return nil
	})
	asJSON := flags.Bool("json", false, "print the full report as JSON")
	export := flags.String("export", "", "check this export file and its manifest instead of an audit directory")
	manifest := flags.String("manifest", "", "the export's manifest (default: FILE.manifest.json)")
	from := flags.String("from", "", "verify every chain shipped to object storage at s3://bucket/prefix instead of a directory")
	if code, ok := parseArgs(flags, args, 0, stderr); !ok {
		return code
	}
	if *from != "" {
		if *dir != "" || *export != "" || *manifest != "" {
			fmt.Fprintln(stderr, "gateway audit verify: --from goes without --dir, --export and --manifest")
			return exitUsage
		}
		keys, ok := loadPubkeys("verify", pubFiles, stderr)
		if !ok {
			return exitUsage
		}
		t, ok := trailFrom("verify", *from, flags, *cfgDir, stderr)
		if !ok {
			return exitUsage
		}
		return auditVerifyFrom(t, audit.Options{Keys: keys}, *asJSON, stdout, stderr)
	}
	if *export != "" {
		if *dir != "" {
			fmt.Fprintln(stderr, "gateway audit verify: give either --export or --dir, not both")
			return exitUsage
		}
		return auditVerifyExport(*export, *manifest, pubFiles, *asJSON, stdout, stderr)
	}
	if *manifest != "" {
		fmt.Fprintln(stderr, "gateway audit verify: --manifest goes with --export")
		return exitUsage
	}
	if !auditDirOf("verify", dir, flags, *cfgDir, stderr) || !checkDir("verify", *dir, stderr) {
		return exitUsage
	}
	keys, ok := loadPubkeys("verify", pubFiles, stderr)
	if !ok {
		return exitUsage
	}
	pl := progressFor(stderr)
	rep, err := audit.VerifyWith(*dir, audit.Options{Keys: keys, Progress: pl.fn()})
	pl.done()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	}
	if verifyFailed(err, stderr) {
		return exitFailed
	}
	if !*asJSON {
		fmt.Fprintln(stdout, verifySummary(rep))
	}
	return exitOK
}

// verifyFailed says on stderr why a verify (of a trail or of an export)
// failed, the first bad entry named where there is one; false when err is
// nil.
func verifyFailed(err error, stderr io.Writer) bool {
	var f *audit.Failure
	switch {
	case errors.As(err, &f):
		fmt.Fprintf(stderr, "gateway audit verify: FAILED: %s: %s\n", failureAt(f), f.Reason)
	case err != nil:
		fmt.Fprintf(stderr, "gateway audit verify: %v\n", err)
	default:
		return false
	}
	return true
}

// failureAt is where a verify failure is: the file, and the line and seq
// when there are ones (a problem with a whole file, such as a missing
// checkpoint, has neither).
func failureAt(f *audit.Failure) string {
	loc := f.File
	if f.Line > 0 {
		loc += fmt.Sprintf(" line %d", f.Line)
	}
	if f.Seq > 0 {
		loc += fmt.Sprintf(" (seq %d)", f.Seq)
	}
	return loc
}

// verifySummary is the one-line result of a successful verify.
func verifySummary(rep audit.Report) string {
	var b strings.Builder
	recoveries := 0
	fmt.Fprintf(&b, "ok: %d chains, %d entries", len(rep.Chains), rep.Entries)
	for _, c := range rep.Chains {
		recoveries += len(c.Recoveries)
		fmt.Fprintf(&b, "; %s: last seq %d hash %s", c.Chain, c.LastSeq, c.LastHash)
		switch cp := c.LastCheckpoint; {
		case cp == nil:
			b.WriteString(", no checkpoint")
		case c.SignaturesChecked && cp.KeyID == "":
			fmt.Fprintf(&b, ", checkpoint seq %d signature ok (no key id: signed before key ids)", cp.Seq)
		case c.SignaturesChecked:
			fmt.Fprintf(&b, ", checkpoint seq %d signature ok (key id %s)", cp.Seq, cp.KeyID)
		case cp.Signature == "":
			fmt.Fprintf(&b, ", checkpoint seq %d unsigned", cp.Seq)
		default:
			fmt.Fprintf(&b, ", checkpoint seq %d signature not checked (no --pubkey)", cp.Seq)
		}
		if c.SignaturesChecked && len(c.KeyIDs) > 1 {
			ids := slices.Clone(c.KeyIDs)
			for i, id := range ids {
				if id == "" {
					ids[i] = "none"
				}
			}
			fmt.Fprintf(&b, ", signed by key ids %s", strings.Join(ids, " then "))
		}
		if c.FirstSigned != nil && c.UnsignedBeforeSigning > 0 {
			// Not a failure: the trail was written unsigned until a key was
			// configured; the links up to the first signed checkpoint pin it.
			fmt.Fprintf(&b, ", %d unsigned %s before signing began at checkpoint seq %d",
				c.UnsignedBeforeSigning, plural(c.UnsignedBeforeSigning, "checkpoint", "checkpoints"), c.FirstSigned.Seq)
		}
	}
	if recoveries > 0 {
		fmt.Fprintf(&b, "; %d recorded crash recoveries", recoveries)
	}
	return b.String()
}

func auditExport(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("audit export", stderr)
	dir := flags.String("dir", "", "audit directory (default: the configuration's audit.dir)")
	cfgDir := flags.String("config", "", "configuration directory whose gateway.yaml names the audit dir "+configDefault+"; with none found, data/audit")
	format := flags.String("format", "", "jsonl (the original lines) or csv (fixed columns, docs/compliance.md)")
	since := flags.String("since", "", "only entries at or after T")
	until := flags.String("until", "", "only entries before T")
	agent := flags.String("agent", "", "only entries of this agent_id")
	kind := flags.String("kind", "", `only entries of this kind ("llm.*" for a prefix)`)
	out := flags.String("out", "", "export file, the manifest going to FILE.manifest.json; - for stdout, the manifest going to stderr")
	from := flags.String("from", "", "export every chain shipped to object storage at s3://bucket/prefix instead of a directory")
	var pubFiles []string
	flags.Func("pubkey", "ed25519 public key (PEM) to check checkpoint signatures with, once per key the trail was signed with; with --since, chains are then verified from their last signed checkpoint before T", func(f string) error {
		pubFiles = append(pubFiles, f)
		return nil
	})
	if code, ok := parseArgs(flags, args, 0, stderr); !ok {
		return code
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "gateway audit export: "+format+"\n", a...)
		return exitUsage
	}
	if *format != "jsonl" && *format != "csv" {
		return usage("--format %q: want jsonl or csv", *format)
	}
	if *out == "" {
		return usage("--out is required")
	}
	if err := checkKind(*kind); err != nil {
		return usage("%v", err)
	}
	f := audit.Filter{Agent: *agent, Kind: *kind}
	var err error
	if f.Since, err = parseTime(*since, time.Now()); err != nil {
		return usage("--since %v", err)
	}
	if f.Until, err = parseTime(*until, time.Now()); err != nil {
		return usage("--until %v", err)
	}
	var fsys fs.FS
	switch {
	case *from != "" && *dir != "":
		return usage("--from goes without --dir")
	case *from != "":
		t, ok := trailFrom("export", *from, flags, *cfgDir, stderr)
		if !ok {
			return exitUsage
		}
		if refuseProblems(t, stderr) {
			return exitFailed
		}
		fsys = t
	case !auditDirOf("export", dir, flags, *cfgDir, stderr) || !checkDir("export", *dir, stderr):
		return exitUsage
	default:
		fsys = os.DirFS(*dir)
	}
	keys, ok := loadPubkeys("export", pubFiles, stderr)
	if !ok {
		return exitUsage
	}
	pl := progressFor(stderr)
	o := audit.Options{Keys: keys, Progress: pl.fn()}
	if *out == "-" {
		return exportToStdout(fsys, f, *format, o, pl, stdout, stderr)
	}
	m, err := audit.ExportFS(fsys, f, *format, *out, o)
	pl.done()
	if err != nil {
		fmt.Fprintf(stderr, "gateway audit export: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "exported %d entries to %s (sha256 %s); manifest %s.manifest.json; verified %s%s\n",
		m.Count, *out, m.SHA256, *out, verifiedSummary(m), windowHint(f, keys))
	return exitOK
}

// exportToStdout is export --out -: stdout carries the export and nothing
// else, so it can be piped or redirected as is; the summary line and then
// the manifest (as the .manifest.json file would hold it) go to stderr.
func exportToStdout(fsys fs.FS, f audit.Filter, format string, o audit.Options, pl *progressLine, stdout, stderr io.Writer) int {
	m, err := audit.ExportToFS(stdout, fsys, f, format, "-", o)
	pl.done()
	if err != nil {
		fmt.Fprintf(stderr, "gateway audit export: %v\n", err)
		return exitFailed
	}
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "gateway audit export: manifest: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "exported %d entries to stdout (sha256 %s); verified %s%s; manifest:\n%s\n",
		m.Count, m.SHA256, verifiedSummary(m), windowHint(f, o.Keys), manifest)
	return exitOK
}

// parseTime reads a --since/--until value: RFC 3339, a date (midnight UTC)
// or a duration before now. Empty means no bound.
func parseTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q: want an RFC 3339 time (2026-01-02T15:04:05Z), a date (2026-01-02) or a duration ago (24h)", s)
}

func auditKeygen(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("audit keygen", stderr)
	prefix := flags.String("out", "", "write PREFIX.key (private) and PREFIX.pub (public)")
	priv := flags.String("private", "", "private key file (with --public)")
	pub := flags.String("public", "", "public key file (with --private)")
	if code, ok := parseArgs(flags, args, 0, stderr); !ok {
		return code
	}
	switch {
	case *prefix != "" && (*priv != "" || *pub != ""):
		fmt.Fprintln(stderr, "gateway audit keygen: give either --out or --private and --public, not both")
		return exitUsage
	case *prefix != "":
		*priv, *pub = *prefix+".key", *prefix+".pub"
	case *priv == "" || *pub == "":
		fmt.Fprintln(stderr, "gateway audit keygen: --out PREFIX (or --private and --public) is required")
		return exitUsage
	}
	if err := audit.Keygen(*priv, *pub); err != nil {
		fmt.Fprintf(stderr, "gateway audit keygen: %v\n", err)
		if errors.Is(err, fs.ErrExist) {
			return exitUsage // never overwrite a key: the caller named the wrong file
		}
		return exitFailed
	}
	key, err := audit.LoadPublicKey(*pub)
	if err != nil {
		fmt.Fprintf(stderr, "gateway audit keygen: read back the public key: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "wrote %s (private, 0600: set audit.signing_key_file to it) and %s (public, key id %s: give it to auditors for verify --pubkey)\n", *priv, *pub, audit.KeyID(key))
	return exitOK
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
