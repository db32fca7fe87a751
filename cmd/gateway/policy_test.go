package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/tester"
)

func writeRego(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const policyUnderTest = `package demo

allow if input.user == "alice"
`

func TestPolicyTest(t *testing.T) {
	passing := writeRego(t, map[string]string{
		"demo.rego": policyUnderTest,
		"demo_test.rego": `package demo_test

import data.demo

test_alice if demo.allow with input as {"user": "alice"}

test_table[tc.note] if {
	some tc in [{"note": "bob", "user": "bob"}, {"note": "eve", "user": "eve"}]
	not demo.allow with input as {"user": tc.user}
}
`,
	})
	failing := writeRego(t, map[string]string{
		"demo.rego": policyUnderTest,
		"demo_test.rego": `package demo_test

import data.demo

test_alice if demo.allow with input as {"user": "alice"}

test_table[tc.note] if {
	some tc in [{"note": "bob", "user": "bob"}, {"note": "alice", "user": "alice"}]
	not demo.allow with input as {"user": tc.user}
}
`,
	})
	broken := writeRego(t, map[string]string{
		"demo.rego":      "package demo\n\nallow if {\n",
		"demo_test.rego": "package demo_test\n\ntest_x if true\n",
	})
	unsafe := writeRego(t, map[string]string{
		"sub/demo.rego": "package demo\n\nallow if x == 1\n",
	})
	empty := writeRego(t, map[string]string{"demo.rego": policyUnderTest})

	tests := []struct {
		name       string
		args       []string
		want       int
		wantOut    []string
		wantErr    []string
		wantNotOut []string
	}{
		{name: "default policies", args: []string{"test", "../../rego"}, want: exitOK,
			wantOut: []string{"PASS  gateway.approval_test.test_seed_example_is_approved", " tests passed, 0 failed"}},
		{name: "passing", args: []string{"test", passing}, want: exitOK,
			wantOut: []string{"PASS  demo_test.test_alice", "PASS  demo_test.test_table", "2 tests passed, 0 failed (3 cases, the count opa test shows: it counts each case of a table test)\n"}, wantNotOut: []string{"bob: PASS"}},
		{name: "verbose lists cases", args: []string{"test", "-v", passing}, want: exitOK,
			wantOut: []string{"  bob: PASS", "  eve: PASS"}},
		{name: "failing case", args: []string{"test", failing}, want: exitFailed,
			wantOut: []string{"PASS  demo_test.test_alice", "FAIL  demo_test.test_table", "  alice: FAIL", "1 tests passed, 1 failed ("}, wantNotOut: []string{"bob:"}},
		{name: "filter", args: []string{"test", "-run", "alice", failing}, want: exitOK,
			wantOut: []string{"1 tests passed, 0 failed\n"}, wantNotOut: []string{"test_table"}},
		{name: "parse error", args: []string{"test", broken}, want: exitUsage,
			wantErr: []string{filepath.Join(broken, "demo.rego") + ":"}},
		{name: "compile error", args: []string{"test", unsafe}, want: exitUsage,
			wantErr: []string{filepath.Join(unsafe, "sub", "demo.rego") + ":3: rego_unsafe_var_error"}},
		{name: "no tests", args: []string{"test", empty}, want: exitFailed, wantOut: []string{"0 tests passed, 0 failed\n"}, wantErr: []string{"no tests found"}},
		{name: "missing dir", args: []string{"test", filepath.Join(empty, "nope")}, want: exitUsage, wantErr: []string{"is not a directory"}},
		{name: "no subcommand", args: nil, want: exitUsage, wantErr: []string{"usage: gateway policy test"}},
		{name: "unknown subcommand", args: []string{"lint"}, want: exitUsage, wantErr: []string{"usage: gateway policy test"}},
		{name: "two dirs", args: []string{"test", passing, failing}, want: exitUsage, wantErr: []string{"unexpected argument"}},
		{name: "bad flag", args: []string{"test", "--nope"}, want: exitUsage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			got := policyMain(tc.args, &out, &errb)
			if got != tc.want {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", got, tc.want, out.String(), errb.String())
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.wantNotOut {
				if strings.Contains(out.String(), w) {
					t.Errorf("stdout has %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
		})
	}
}

// The summary of the default policies is the plain closing line CI reads;
// its count of cases is the one opa test's own reporter shows.
func TestPolicyTestSummaryLine(t *testing.T) {
	var out, errb bytes.Buffer
	if got := policyMain([]string{"test", "../../rego"}, &out, &errb); got != exitOK {
		t.Fatalf("exit %d\n%s%s", got, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	m := regexp.MustCompile(`^([1-9][0-9]*) tests passed, 0 failed \(([0-9]+) cases, the count opa test shows: it counts each case of a table test\)$`).FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("last line %q", last)
	}
	if strings.Count(out.String(), "PASS  ") != len(lines)-1 {
		t.Errorf("every line but the summary should be a PASS:\n%s", out.String())
	}
	if opa := opaTestCount(t, "../../rego"); m[2] != opa {
		t.Errorf("%s cases, opa test's reporter counts %s", m[2], opa)
	}
}

// opaTestCount runs dir's tests as opa test does and returns the N of its
// "PASS: N/N" line.
func opaTestCount(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	modules, store, err := tester.Load([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Abort(ctx, txn)
	ch, err := tester.NewRunner().SetStore(store).SetModules(modules).RunTests(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := (tester.PrettyReporter{Output: &out}).Report(ch); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`PASS: ([0-9]+)/([0-9]+)`).FindStringSubmatch(out.String())
	if m == nil || m[1] != m[2] {
		t.Fatalf("opa's reporter: %q", out.String())
	}
	return m[1]
}
