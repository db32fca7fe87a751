package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sacpgw/gateway/audit"
)

// auditProve is `gateway audit prove`.
func auditProve(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("audit prove", stderr)
	dir, cfgDir, chain, out := proofFlags(flags)
	seq := flags.Int64("seq", 0, "seq of the entry to prove")
	cpFile := flags.String("checkpoint", "", "checkpoint note to prove against (default: the chain's latest signed checkpoint)")
	older := flags.String("consistency", "", "checkpoint note OLD: prove that checkpoint NEW (the argument after it) extends it")
	if err := flags.Parse(args); err != nil {
		return helpOrUsage(err)
	}
	if *older != "" {
		if flags.NArg() != 1 || *seq != 0 || *cpFile != "" || *chain != "" {
			fmt.Fprintln(stderr, "gateway audit prove: --consistency OLD NEW takes two checkpoint files and no --seq, --checkpoint or --chain")
			return exitUsage
		}
	} else if flags.NArg() > 0 || *seq < 1 {
		fmt.Fprintln(stderr, "gateway audit prove: give --seq N (a seq of 1 or more), or --consistency OLD NEW")
		return exitUsage
	}
	if !auditDirOf("prove", dir, flags, *cfgDir, stderr) || !checkDir("prove", *dir, stderr) {
		return exitUsage
	}
	var data []byte
	if *older != "" {
		oldNote, ok1 := readArgFile("prove", "--consistency", *older, stderr)
		newNote, ok2 := readArgFile("prove", "NEW", flags.Arg(0), stderr)
		if !ok1 || !ok2 {
			return exitUsage
		}
		p, err := audit.ProveConsistency(*dir, oldNote, newNote)
		if err != nil {
			fmt.Fprintf(stderr, "gateway audit prove: %v\n", err)
			return exitFailed
		}
		data = p.Marshal()
	} else {
		var cp []byte
		if *cpFile != "" {
			var ok bool
			if cp, ok = readArgFile("prove", "--checkpoint", *cpFile, stderr); !ok {
				return exitUsage
			}
		}
		p, err := audit.Prove(*dir, *chain, *seq, cp)
		if err != nil {
			fmt.Fprintf(stderr, "gateway audit prove: %v\n", err)
			return exitFailed
		}
		data = p.Marshal()
	}
	return writeOut("prove", *out, data, stdout, stderr)
}

// auditCheckpoint is `gateway audit checkpoint`: a chain's signed
// checkpoint note, to keep and later prove against or extend from.
func auditCheckpoint(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("audit checkpoint", stderr)
	dir, cfgDir, chain, out := proofFlags(flags)
	size := flags.Int64("size", -1, "the checkpoint of this tree size (default: the latest)")
	if code, ok := parseArgs(flags, args, 0, stderr); !ok {
		return code
	}
	if !auditDirOf("checkpoint", dir, flags, *cfgDir, stderr) || !checkDir("checkpoint", *dir, stderr) {
		return exitUsage
	}
	note, err := audit.LatestCheckpointNote(*dir, *chain, *size)
	if err != nil {
		fmt.Fprintf(stderr, "gateway audit checkpoint: %v\n", err)
		return exitFailed
	}
	return writeOut("checkpoint", *out, note, stdout, stderr)
}

// auditVerifyProof is `gateway audit verify-proof`: an auditor's check of
// a proof with only the public keys.
func auditVerifyProof(args []string, stdout, stderr io.Writer) int {
	flags := newFlagSet("audit verify-proof", stderr)
	var pubFiles []string
	flags.Func("pubkey", "ed25519 public key (PEM) the checkpoint is signed with; repeat it for each key to accept", func(f string) error {
		pubFiles = append(pubFiles, f)
		return nil
	})
	asJSON := flags.Bool("json", false, "print what the proof establishes as JSON")
	if err := flags.Parse(args); err != nil {
		return helpOrUsage(err)
	}
	if flags.NArg() != 1 || len(pubFiles) == 0 {
		fmt.Fprintln(stderr, "gateway audit verify-proof: give --pubkey FILE and one proof file")
		return exitUsage
	}
	keys, ok := loadPubkeys("verify-proof", pubFiles, stderr)
	if !ok {
		return exitUsage
	}
	data, ok := readArgFile("verify-proof", "PROOF", flags.Arg(0), stderr)
	if !ok {
		return exitUsage
	}
	var res any
	var summary string
	var err error
	if bytes.HasPrefix(data, []byte("{")) {
		var p audit.ConsistencyProof
		if p, err = audit.ParseConsistencyProof(data); err == nil {
			var r audit.ConsistencyResult
			r, err = audit.VerifyConsistencyProof(p, keys)
			res, summary = r, fmt.Sprintf("ok: chain %s: the signed tree of size %d extends the signed tree of size %d", r.Chain, r.NewSize, r.OldSize)
		}
	} else {
		var p audit.InclusionProof
		if p, err = audit.ParseInclusionProof(data); err == nil {
			var r audit.ProofResult
			r, err = audit.VerifyInclusionProof(p, keys)
			res, summary = r, fmt.Sprintf("ok: chain %s: entry seq %d (%s, %s) is leaf %d of the signed tree of size %d",
				r.Chain, r.Entry.Seq, r.Entry.Kind, r.Entry.TS.Format("2006-01-02T15:04:05Z07:00"), r.Index, r.Size)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "gateway audit verify-proof: %s: %v\n", flags.Arg(0), err)
		return exitFailed
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
	} else {
		fmt.Fprintln(stdout, summary)
	}
	return exitOK
}

func proofFlags(flags *flag.FlagSet) (dir, cfgDir, chain, out *string) {
	dir = flags.String("dir", "", "audit directory (default: the configuration's audit.dir)")
	cfgDir = flags.String("config", "", "configuration directory whose gateway.yaml names the audit dir "+configDefault+"; with none found, data/audit")
	chain = flags.String("chain", "", "the chain (default: the only chain in the directory)")
	out = flags.String("out", "-", "write to this file; - is stdout")
	return dir, cfgDir, chain, out
}

// readArgFile reads a file named on the command line; false (printed) when
// it cannot, a usage error.
func readArgFile(cmd, what, path string, stderr io.Writer) ([]byte, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "gateway audit %s: %s %s: %v\n", cmd, what, path, err)
		return nil, false
	}
	return data, true
}

// writeOut writes data to the file out, or to stdout for "-".
func writeOut(cmd, out string, data []byte, stdout, stderr io.Writer) int {
	if out == "-" {
		_, _ = stdout.Write(data)
		return exitOK
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		fmt.Fprintf(stderr, "gateway audit %s: --out: %v\n", cmd, err)
		return exitUsage
	}
	return exitOK
}
