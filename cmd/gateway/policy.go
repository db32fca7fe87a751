package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/sacpgw/gateway/internal/config"
)

// policyMain runs "gateway policy test [--config DIR] [-run REGEX] [-v] [POLICYDIR]":
// the Rego unit tests (*_test.rego) of POLICYDIR with OPA's tester, as
// "opa test" does. POLICYDIR defaults to gateway.yaml's policy.dir when
// --config is given, else "rego". It prints PASS/FAIL per test, the failing
// cases of table tests, and "N passed, M failed"; exit 0 when all pass, 1
// when any fails, 2 on usage, load or compile errors (file:line: message).
func policyMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "test" {
		fmt.Fprintln(stderr, "usage: gateway policy test [--config DIR] [-run REGEX] [-v] [POLICYDIR]  (POLICYDIR defaults to the policy.dir of DIR, default config)")
		return exitUsage
	}
	fs := newFlagSet("policy test", stderr)
	cfgDir := fs.String("config", "", "configuration directory whose gateway.yaml names the policy dir "+configDefault)
	run := fs.String("run", "", "run only the tests whose package.name matches this regular expression")
	verbose := fs.Bool("v", false, "also list the cases of passing table tests")
	timeout := fs.Duration("timeout", 5*time.Second, "limit for each test")
	if code, ok := parseArgs(fs, args[1:], 1, stderr); !ok {
		return code
	}
	// The policy dir: the argument, else the configuration's policy.dir
	// (relative paths there are relative to the configuration directory),
	// else rego when the default configuration directory does not exist.
	dir := "rego"
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "config" })
	_, statErr := os.Stat(*cfgDir)
	switch {
	case fs.NArg() == 1:
		dir = fs.Arg(0)
	case statErr == nil || explicit:
		cfg, err := config.Load(*cfgDir)
		if err != nil {
			reportConfig(stderr, err)
			return exitUsage
		}
		dir = cfg.Gateway.Policy.Dir
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		fmt.Fprintf(stderr, "gateway policy test: %s is not a directory\n", dir)
		return exitUsage
	}
	return runPolicyTests(context.Background(), dir, *run, *verbose, *timeout, stdout, stderr)
}

func runPolicyTests(ctx context.Context, dir, run string, verbose bool, timeout time.Duration, stdout, stderr io.Writer) int {
	popts := ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true}
	// Names starting with "." are skipped, as the engine does: a mounted
	// ConfigMap holds every file twice, under ..data and ..<timestamp>.
	hidden := func(_ string, info fs.FileInfo, depth int) bool {
		return depth > 0 && strings.HasPrefix(info.Name(), ".")
	}
	modules, store, err := tester.LoadWithParserOptions([]string{dir}, hidden, popts)
	if err != nil {
		reportRegoErrors(stderr, err)
		return exitUsage
	}
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		fmt.Fprintf(stderr, "gateway policy test: %v\n", err)
		return exitUsage
	}
	defer store.Abort(ctx, txn)

	compiler := ast.NewCompiler().
		WithPathConflictsCheck(storage.NonEmpty(ctx, store, txn)).
		WithEnablePrintStatements(true).
		WithCapabilities(ast.CapabilitiesForThisVersion()).
		WithUseTypeCheckAnnotations(true)
	ch, err := tester.NewRunner().
		SetCompiler(compiler).
		SetStore(store).
		SetModules(modules).
		CapturePrintOutput(true).
		SetTimeout(timeout).
		Filter(run).
		RunTests(ctx, txn)
	if err != nil {
		reportRegoErrors(stderr, err)
		return exitUsage
	}
	var results []*tester.Result
	for r := range ch {
		results = append(results, r)
	}
	failed := printResults(stdout, results, verbose)
	if len(results) == 0 {
		fmt.Fprintf(stderr, "gateway policy test: no tests found in %s\n", dir)
		return exitFailed
	}
	if failed > 0 {
		return exitFailed
	}
	return exitOK
}

// printResults prints the results by file, then line, each test's
// outcome with its failing cases (all with verbose) and output, then the
// counts; it returns how many tests failed.
func printResults(stdout io.Writer, results []*tester.Result, verbose bool) (failed int) {
	// Results arrive in any order; print them by file, then line.
	sort.SliceStable(results, func(i, j int) bool {
		a, b := results[i].Location, results[j].Location
		if a == nil || b == nil {
			return results[i].Package+results[i].Name < results[j].Package+results[j].Name
		}
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Row < b.Row
	})
	// opa test counts cases: each leaf case of a table test, each other
	// test once. Both counts are printed, so ours is not read as a
	// different number of checks.
	var passed, skipped, cases int
	for _, r := range results {
		name := strings.TrimPrefix(r.Package, "data.") + "." + r.Name
		switch {
		case r.Skip:
			skipped++
			fmt.Fprintf(stdout, "SKIP  %s\n", name)
			continue
		case r.Pass():
			passed++
			cases += caseCount(r)
			fmt.Fprintf(stdout, "PASS  %s (%s)\n", name, r.Duration.Round(time.Microsecond))
		case r.Error != nil:
			failed++
			cases++
			fmt.Fprintf(stdout, "ERROR %s (%s): %v\n", name, location(r.Location), r.Error)
		default:
			failed++
			cases += caseCount(r)
			fmt.Fprintf(stdout, "FAIL  %s (%s)\n", name, location(r.Location))
		}
		for path, sr := range r.SubResults.Iter {
			if sr.Fail || verbose {
				fmt.Fprintf(stdout, "%s%s: %s\n", strings.Repeat("  ", len(path)), path[len(path)-1], subOutcome(sr))
			}
		}
		if !r.Pass() && len(r.Output) > 0 {
			for line := range strings.SplitSeq(strings.TrimRight(string(r.Output), "\n"), "\n") {
				fmt.Fprintf(stdout, "      %s\n", line)
			}
		}
	}
	summary := fmt.Sprintf("%d tests passed, %d failed", passed, failed)
	if skipped > 0 {
		summary += fmt.Sprintf(", %d skipped", skipped)
	}
	if cases != passed+failed {
		summary += fmt.Sprintf(" (%d cases, the count opa test shows: it counts each case of a table test)", cases)
	}
	fmt.Fprintln(stdout, summary)
	return failed
}

// caseCount is how many results opa test counts for r: its leaf cases,
// or 1 for a test without cases.
func caseCount(r *tester.Result) int {
	n := 0
	for _, sr := range r.SubResults.Iter {
		if len(sr.SubResults) == 0 {
			n++
		}
	}
	return max(n, 1)
}

func subOutcome(sr *tester.SubResult) string {
	if sr.Fail {
		return "FAIL"
	}
	return "PASS"
}

func location(l *ast.Location) string {
	if l == nil {
		return "?"
	}
	return fmt.Sprintf("%s:%d", l.File, l.Row)
}

// reportRegoErrors prints load and compile errors one "file:line: message"
// per line.
func reportRegoErrors(w io.Writer, err error) {
	var lerrs loader.Errors
	var aerrs ast.Errors
	switch {
	case errors.As(err, &lerrs):
		for _, e := range lerrs {
			reportRegoErrors(w, e)
		}
	case errors.As(err, &aerrs):
		aerrs.Sort()
		for _, e := range aerrs {
			fmt.Fprintln(w, e.Error())
		}
	default:
		fmt.Fprintln(w, err.Error())
	}
}
