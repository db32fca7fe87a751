package doctest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/tester"
)

// The docs show "go run github.com/open-policy-agent/opa@vX eval|test|check".
// Building OPA's command line costs minutes on a fresh machine, and its
// module graph (cobra and the rest) is not this module's, so a run block
// gets an "opa" of the test's own making instead: this test binary run again
// with DOCTEST_OPA=1, doing what those three commands do with the OPA
// packages the gateway itself is built with. The rewrite happens only when
// the doc's version is the one in go.mod, so the pinned version cannot drift
// either.

// opaVersion is go.mod's version of OPA, the one this binary is built with
// (a test binary carries no dependency versions to read).
func opaVersion(root string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}", "github.com/open-policy-agent/opa")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/open-policy-agent/opa: %v", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// opaArgs are the parsed flags of the three commands; anything else is
// refused, so a snippet never passes by a flag silently ignored.
type opaArgs struct {
	data, ignore []string
	input        string
	format       string
	verbose      bool
	strict       bool
	positional   []string
}

func parseOPAArgs(args []string) (opaArgs, error) {
	a := opaArgs{format: "json"}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(args[i], "=")
		next := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("flag %s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		var v string
		switch name {
		case "-d", "--data":
			v, err = next()
			a.data = append(a.data, v)
		case "--ignore":
			v, err = next()
			a.ignore = append(a.ignore, v)
		case "-i", "--input":
			a.input, err = next()
		case "-f", "--format":
			a.format, err = next()
		case "-v", "--verbose":
			a.verbose = true
		case "--strict", "-S":
			a.strict = true
		default:
			if strings.HasPrefix(name, "-") {
				return a, fmt.Errorf("doctest's opa does not know the flag %s: add it to internal/doctest/opa_test.go or skip the snippet", name)
			}
			a.positional = append(a.positional, args[i])
		}
		if err != nil {
			return a, err
		}
	}
	return a, nil
}

// ignoreFilter skips the names --ignore matches, as opa's loader does.
func ignoreFilter(patterns []string, onlyRego bool) loader.Filter {
	return func(abspath string, info fs.FileInfo, depth int) bool {
		if onlyRego && !info.IsDir() && filepath.Ext(info.Name()) != ".rego" {
			return true
		}
		for _, p := range patterns {
			if loader.GlobExcludeName(p, 1)(abspath, info, depth) {
				return true
			}
		}
		return false
	}
}

// opaMain is "opa eval|test|check" for run blocks; it returns the exit code.
func opaMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "doctest's opa: eval, test or check")
		return 2
	}
	a, err := parseOPAArgs(args[1:])
	if err != nil {
		fmt.Fprintln(stderr, "opa:", err)
		return 2
	}
	ctx := context.Background()
	switch args[0] {
	case "eval":
		return opaEval(ctx, a, stdout, stderr)
	case "test":
		return opaTest(ctx, a, stdout, stderr)
	case "check":
		return opaCheck(a, stderr)
	}
	fmt.Fprintf(stderr, "doctest's opa does not know the command %q: add it to internal/doctest/opa_test.go or skip the snippet\n", args[0])
	return 2
}

func opaEval(ctx context.Context, a opaArgs, stdout, stderr io.Writer) int {
	if len(a.positional) != 1 {
		fmt.Fprintln(stderr, "opa eval: one query")
		return 2
	}
	opts := []func(*rego.Rego){rego.Query(a.positional[0]), rego.Load(a.data, ignoreFilter(a.ignore, false))}
	if a.input != "" {
		raw, err := os.ReadFile(a.input)
		if err != nil {
			fmt.Fprintln(stderr, "opa eval:", err)
			return 2
		}
		d := json.NewDecoder(strings.NewReader(string(raw)))
		d.UseNumber()
		var in any
		if err := d.Decode(&in); err != nil {
			fmt.Fprintf(stderr, "opa eval: %s: %v\n", a.input, err)
			return 2
		}
		opts = append(opts, rego.Input(in))
	}
	rs, err := rego.New(opts...).Eval(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	switch a.format {
	case "pretty":
		// One value prints as indented JSON, as opa's pretty format does.
		switch {
		case len(rs) == 0:
			fmt.Fprintln(stdout, "undefined")
		case len(rs) == 1 && len(rs[0].Expressions) == 1 && len(rs[0].Bindings) == 0:
			out, _ := json.MarshalIndent(rs[0].Expressions[0].Value, "", "  ")
			fmt.Fprintln(stdout, string(out))
		default:
			fmt.Fprintln(stderr, "doctest's opa prints one value in the pretty format, not a table")
			return 2
		}
	case "json":
		out, _ := json.MarshalIndent(map[string]any{"result": rs}, "", "  ")
		fmt.Fprintln(stdout, string(out))
	default:
		fmt.Fprintf(stderr, "doctest's opa does not know the format %q\n", a.format)
		return 2
	}
	return 0
}

func opaTest(ctx context.Context, a opaArgs, stdout, stderr io.Writer) int {
	modules, store, err := tester.LoadWithParserOptions(a.positional, ignoreFilter(a.ignore, false),
		ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ch, err := tester.NewRunner().SetStore(store).SetModules(modules).RunTests(ctx, nil)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var pass, total int
	for r := range ch {
		total++
		if r.Pass() {
			pass++
		}
		if a.verbose || !r.Pass() {
			fmt.Fprintln(stdout, r.String())
		}
	}
	fmt.Fprintf(stdout, "PASS: %d/%d\n", pass, total)
	if total == 0 || pass != total {
		return 2 // opa test's exit code for failing tests
	}
	return 0
}

func opaCheck(a opaArgs, stderr io.Writer) int {
	res, err := loader.NewFileLoader().WithRegoVersion(ast.RegoV1).WithProcessAnnotation(true).
		Filtered(a.positional, ignoreFilter(a.ignore, true))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	c := ast.NewCompiler().WithCapabilities(ast.CapabilitiesForThisVersion()).
		WithEnablePrintStatements(true).WithStrict(a.strict).WithUseTypeCheckAnnotations(true)
	if c.Compile(res.ParsedModules()); c.Failed() {
		fmt.Fprintln(stderr, c.Errors)
		return 1
	}
	return 0
}

// TestOPAShim holds the shim to what the real commands answer: the worked
// example of docs/policy-authoring.md is approved by the shipped policies, a
// failing test fails, a strict check catches an unused variable.
func TestOPAShim(t *testing.T) {
	var out, errb strings.Builder
	if code := opaMain([]string{"eval", "-d", "../../rego", "--ignore", "*_test.rego", "-i", "../../docs/examples/approval-input.json",
		"data.gateway.approval.decision.status", "--format", "pretty"}, &out, &errb); code != 0 || out.String() != "\"approved\"\n" {
		t.Errorf("eval: %d %q %s", code, out.String(), errb.String())
	}
	// "opa test rego/" runs in docs/policy-authoring.md; here, a failing test.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x_test.rego"), []byte("package x_test\n\ntest_fails if { 1 == 2 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := opaMain([]string{"test", dir}, &out, &errb); code != 2 || !strings.Contains(out.String(), "PASS: 0/1") {
		t.Errorf("test: %d %q %s", code, out.String(), errb.String())
	}
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.rego"), []byte("package x\n\nf(a) := 1 if { b := 2 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := opaMain([]string{"check", dir}, &out, &errb); code != 0 {
		t.Errorf("check without --strict: %d %s", code, errb.String())
	}
	errb.Reset()
	if code := opaMain([]string{"check", "--strict", dir}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "unused") {
		t.Errorf("check --strict: %d %s", code, errb.String())
	}
	if code := opaMain([]string{"eval", "--unknown", "x"}, &out, &errb); code != 2 {
		t.Errorf("an unknown flag: %d", code)
	}
}
