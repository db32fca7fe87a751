package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/audit/ship"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/egress"
)

// trailFrom opens the trail shipped to url (verify and export --from).
// The storage settings are the configuration's audit.ship, its bucket
// and prefix replaced by url; without one (an auditor's machine), the
// environment's: AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (then path-style
// addressing), AWS_REGION, and the AWS_ACCESS_KEY_ID family.
func trailFrom(cmd, url string, flags *flag.FlagSet, cfgDir string, stderr io.Writer) (*ship.Trail, bool) {
	sc, policy, ok := shipSettings(cmd, flags, cfgDir, stderr)
	if !ok {
		return nil, false
	}
	sc.URL = url
	if probs := sc.Validate(); len(probs) > 0 {
		fmt.Fprintf(stderr, "gateway audit %s: --from: %s\n", cmd, probs[0].Msg)
		return nil, false
	}
	t, err := ship.OpenTrail(context.Background(), sc, policy)
	if err != nil {
		fmt.Fprintf(stderr, "gateway audit %s: --from %s: %v\n", cmd, url, err)
		return nil, false
	}
	return t, true
}

func shipSettings(cmd string, flags *flag.FlagSet, cfgDir string, stderr io.Writer) (ship.Config, *egress.Policy, bool) {
	explicit := false
	flags.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "config" })
	if cfgDir == "" {
		cfgDir, explicit = "config", false
	}
	if _, err := os.Stat(cfgDir); err == nil || explicit {
		cfg, err := config.Load(cfgDir)
		if err != nil {
			fmt.Fprintf(stderr, "gateway audit %s: --config %s:\n", cmd, cfgDir)
			reportConfig(stderr, err)
			return ship.Config{}, nil, false
		}
		if sc := cfg.Gateway.Audit.Ship; sc != nil {
			// As the gateway itself reaches the storage.
			return *sc, &egress.Policy{Allowed: cfg.Gateway.Messaging.AllowedPrefixes}, true
		}
	}
	sc := ship.Config{Endpoint: firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"), Region: firstEnv("AWS_REGION", "AWS_DEFAULT_REGION")}
	sc.PathStyle = sc.Endpoint != ""
	return sc, nil, true
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// auditVerifyFrom is verify --from: every chain in the bucket, each end to
// end, plus what the listing shows (a file under another chain's prefix,
// a hole in the checkpoints); chains whose end no checkpoint covers are
// listed after the summary.
func auditVerifyFrom(t *ship.Trail, keys audit.Options, asJSON bool, stdout, stderr io.Writer) int {
	pl := progressFor(stderr)
	keys.Progress = pl.fn()
	rep, err := t.Verify(keys)
	pl.done()
	unfinished := ship.Unfinished(rep)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			audit.Report
			Unfinished []string `json:"unfinished"`
		}{rep, unfinished})
	}
	if verifyFailed(err, stderr) {
		for i := 1; i < len(rep.Failures); i++ { // every broken chain, not only the first
			f := rep.Failures[i]
			fmt.Fprintf(stderr, "gateway audit verify: FAILED: %s: %s\n", failureAt(&f), f.Reason)
		}
		return exitFailed
	}
	if !asJSON {
		fmt.Fprintln(stdout, verifySummary(rep))
		for _, u := range unfinished {
			fmt.Fprintf(stdout, "note: %s\n", u)
		}
	}
	return exitOK
}

// refuseProblems refuses an export --from whose listing shows a problem.
func refuseProblems(t *ship.Trail, stderr io.Writer) bool {
	p := t.Problems()
	if len(p) == 0 {
		return false
	}
	fmt.Fprintf(stderr, "gateway audit export: export refused: %v\n", &p[0])
	return true
}
