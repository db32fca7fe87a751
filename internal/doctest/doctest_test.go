package doctest

// TestDocs checks every fenced code block of README.md and docs/*.md, so the
// docs cannot drift from the gateway again. What each block gets:
//
//   - json: read strictly (valid UTF-8, no name twice at any depth, one
//     value); a bare "…" between elements or members stands for "more here"
//     and is removed first. "response" compares it with the answer of the run
//     block right before it: every member of the example, at every depth, is
//     in the real answer with the same JSON kind (string, number, object, ...;
//     values may differ: ids, times). "response complete" also wants every
//     member of the real answer in the example. "file PATH": the block is the
//     JSON of that file of the repository.
//   - yaml: every document parses, without a key twice in a mapping; "config
//     NAME" puts the block in a copy of the shipped config/ as NAME and wants
//     "gateway config check" to pass.
//   - rego: parses as a v1 module with OPA's parser; "rego-fragment" for a
//     block without a package line.
//   - sh: "run" or "skip REASON", nothing else: every shell snippet is run or
//     says why not. How a run block runs is told at runBlock.
//   - python, js, go: parsed when python3 or node is on PATH (go: go/parser);
//     never a failure because an interpreter is missing.
//   - anything else (text, mermaid, markdown, http): listed by -v, not checked.
//
// "skip REASON" works for every language. An annotation that does not fit
// its block, or a fence never closed, fails the test.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"gopkg.in/yaml.v3"
)

// tools are what run blocks may call besides the gateway; CI installs them.
var tools = []string{"bash", "curl", "jq", "openssl", "sha256sum", "gzip"}

const (
	blockTimeout = 90 * time.Second // one run block, all its commands
	outputLimit  = 2000             // bytes of a command's output quoted in a failure
)

func TestMain(m *testing.M) {
	// The run blocks' "opa" is this binary again (opa_test.go).
	if os.Getenv("DOCTEST_OPA") == "1" {
		os.Exit(opaMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestDocs(t *testing.T) {
	root, err := filepath.Abs("../..") // the test runs in internal/doctest
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(d, root+string(filepath.Separator))))
	}

	all := map[string][]block{}
	nrun := 0
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		blocks, errs := parseBlocks(f, string(src))
		for _, err := range errs {
			t.Error(err)
		}
		for i, b := range blocks {
			var prev *block
			if i > 0 {
				prev = &blocks[i-1]
			}
			if err := checkAnnotation(b, prev); err != nil {
				t.Errorf("%s: %v", b.where(), err)
				continue
			}
			switch {
			case b.kind == "run" || b.kind == "config":
				nrun++
			case b.kind == "skip":
				t.Logf("%s: %s block skipped: %s", b.where(), b.lang, b.arg)
			case !checked[b.lang]:
				t.Logf("%s: %s block, not checked", b.where(), b.lang)
			case interpreters[b.lang] != "":
				if _, err := exec.LookPath(interpreters[b.lang]); err != nil {
					t.Logf("%s: %s block not parsed: no %s on PATH", b.where(), b.lang, interpreters[b.lang])
				}
			}
			if err := checkStatic(root, b); err != nil {
				t.Errorf("%s: %s block: %v", b.where(), b.lang, err)
			}
		}
		all[f] = blocks
	}
	if nrun == 0 {
		return
	}
	if testing.Short() {
		t.Logf("-short: %d run and config blocks not run", nrun)
		return
	}
	h := newHarness(t, root)
	for _, f := range files {
		if slices.ContainsFunc(all[f], func(b block) bool { return b.kind == "run" || b.kind == "config" }) {
			t.Run(f, func(t *testing.T) { h.runFile(t, all[f]) })
		}
	}
}

// checked are the languages checkStatic reads; interpreters, those it reads
// only when their interpreter is on PATH.
var (
	checked      = map[string]bool{"json": true, "yaml": true, "rego": true, "go": true, "python": true, "js": true, "sh": true}
	interpreters = map[string]string{"python": "python3", "js": "node"}
)

// checkAnnotation says whether a block's annotation fits it.
func checkAnnotation(b block, prev *block) error {
	switch b.kind {
	case "":
		if b.lang == "sh" {
			return errors.New(`a shell block needs "<!-- doctest: run -->" or "<!-- doctest: skip REASON -->" on the line before it: every shell snippet is run or says why not`)
		}
	case "skip":
		if b.arg == "" {
			return errors.New("skip needs a reason: <!-- doctest: skip REASON -->")
		}
	case "run":
		if b.lang != "sh" {
			return fmt.Errorf("run is for sh blocks, not %s", b.lang)
		}
		if _, err := allowedStatuses(b.arg); err != nil {
			return err
		}
	case "response":
		if b.lang != "json" {
			return fmt.Errorf("response is for json blocks, not %s", b.lang)
		}
		if b.arg != "" && b.arg != "complete" {
			return fmt.Errorf("response takes nothing or complete, not %q", b.arg)
		}
		if prev == nil || prev.kind != "run" {
			return errors.New("a response block must come right after a run block: it is compared with that block's output")
		}
	case "file":
		if b.arg == "" {
			return errors.New("file needs a path from the repository root: <!-- doctest: file PATH -->")
		}
	case "config":
		if b.lang != "yaml" || b.arg == "" || strings.ContainsAny(b.arg, `/\`) {
			return errors.New("config is for yaml blocks and names a file of config/: <!-- doctest: config workflows.yaml -->")
		}
	case "rego-fragment":
		if b.lang != "rego" {
			return fmt.Errorf("rego-fragment is for rego blocks, not %s", b.lang)
		}
	default:
		return fmt.Errorf("unknown doctest annotation %q (run, skip, response, file, config, rego-fragment)", b.kind)
	}
	return nil
}

// checkStatic is every check that needs no gateway.
func checkStatic(root string, b block) error {
	if b.kind == "skip" {
		return nil
	}
	switch b.lang {
	case "json":
		v, elided, err := readJSON(b.text)
		if err != nil {
			return err
		}
		if b.kind == "response" && b.arg == "complete" && elided {
			return errors.New(`"response complete" shows the whole answer: it cannot elide with "…"`)
		}
		if b.kind == "file" {
			raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(b.arg)))
			if err != nil {
				return err
			}
			f, _, err := readJSON(string(raw))
			if err != nil {
				return fmt.Errorf("%s: %v", b.arg, err)
			}
			if !jsonEqual(v, f) {
				return fmt.Errorf("the block is not the JSON of %s: change one to match the other", b.arg)
			}
		}
	case "yaml":
		docs, err := readYAML(b.text)
		if err != nil {
			return err
		}
		if b.kind == "file" {
			raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(b.arg)))
			if err != nil {
				return err
			}
			f, err := readYAML(string(raw))
			if err != nil {
				return fmt.Errorf("%s: %v", b.arg, err)
			}
			if !jsonEqual(docs, f) {
				return fmt.Errorf("the block is not the YAML of %s: change one to match the other", b.arg)
			}
		}
	case "rego":
		// Blank lines before the block put its lines where they are in the
		// Markdown file, so an error's file:line points into the doc.
		text := strings.Repeat("\n", b.line) + b.text
		if b.kind == "rego-fragment" {
			text = "package doctest.fragment" + text
		}
		if _, err := ast.ParseModuleWithOpts(b.file, text, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true}); err != nil {
			return err
		}
	case "go":
		return parseGo(b.text)
	case "python":
		if py, err := exec.LookPath("python3"); err == nil {
			out, err := exec.Command(py, "-I", "-c", "import ast, sys; ast.parse(sys.stdin.read(), sys.argv[1])", b.where()).CombinedOutput()
			if err != nil {
				return fmt.Errorf("python3 cannot parse it: %s", clip(out))
			}
		}
	case "js":
		if node, err := exec.LookPath("node"); err == nil {
			dir, err := os.MkdirTemp("", "doctest-js")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			f := filepath.Join(dir, "snippet.mjs") // a module: import and top-level await
			if err := os.WriteFile(f, []byte(b.text), 0o644); err != nil {
				return err
			}
			if out, err := exec.Command(node, "--check", f).CombinedOutput(); err != nil {
				return fmt.Errorf("node cannot parse it: %s", clip(out))
			}
		}
	}
	if b.kind == "file" && b.lang != "json" && b.lang != "yaml" {
		raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(b.arg)))
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(raw)) != strings.TrimSpace(b.text) {
			return fmt.Errorf("the block is not the text of %s", b.arg)
		}
	}
	return nil
}

// readYAML reads every document of a YAML text; yaml.v3 refuses a key given
// twice in one mapping.
func readYAML(text string) ([]any, error) {
	d := yaml.NewDecoder(strings.NewReader(text))
	var docs []any
	for {
		var v any
		err := d.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, v)
	}
}

// jsonEqual compares two decoded values through their JSON encoding (sorted
// keys), so YAML's and JSON's number types compare as numbers.
func jsonEqual(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	ja, _ = json.Marshal(va)
	jb, _ = json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// parseGo parses a Go snippet as a file, else as the statements of a
// function body, else as declarations.
func parseGo(text string) error {
	fset := token.NewFileSet()
	_, err := parser.ParseFile(fset, "snippet.go", text, 0)
	if err == nil {
		return nil
	}
	if _, err2 := parser.ParseFile(fset, "snippet.go", "package p\nfunc _() {\n"+text+"\n}\n", 0); err2 == nil {
		return nil
	}
	if _, err3 := parser.ParseFile(fset, "snippet.go", "package p\n"+text, 0); err3 == nil {
		return nil
	}
	return err
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > outputLimit {
		s = s[:outputLimit] + " …(cut)"
	}
	return s
}

// harness holds what run blocks share: the built gateway, the running one,
// and the directory of commands put first on their PATH.
type harness struct {
	root    string
	bin     string // holds gateway, curl, opa
	gwDir   string // the running gateway's directory: config/, rego/, data/
	addr    string // 127.0.0.1:PORT of the running gateway
	path    string // PATH for run blocks
	opa     string // the OPA version the docs may pin
	tmpRoot string
}

// newHarness checks the tools, builds the gateway once and starts it on a
// free port, serving a copy of the shipped configuration.
func newHarness(t *testing.T, root string) *harness {
	var missing []string
	paths := map[string]string{}
	for _, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			missing = append(missing, tool)
		}
		paths[tool] = p
	}
	if len(missing) > 0 {
		t.Fatalf("the docs' shell snippets need %s on PATH (CI installs them: .ci/run)", strings.Join(missing, ", "))
	}
	h := &harness{root: root, tmpRoot: t.TempDir()}
	var err error
	if h.opa, err = opaVersion(root); err != nil {
		t.Fatal(err)
	}
	h.bin = filepath.Join(h.tmpRoot, "bin")
	if err := os.MkdirAll(h.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-buildvcs=false", "-o", filepath.Join(h.bin, "gateway"), "./cmd/gateway")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gateway: %v\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// curl: the real one, failing on an HTTP status the block does not
	// allow. --fail-with-body would refuse every 4xx; the docs show some on
	// purpose ("run status=422"), so the status is read from the headers.
	writeScript(t, filepath.Join(h.bin, "curl"), `#!/bin/sh
# doctest's curl: the real one; an answer outside 1xx-3xx and $DOCTEST_ALLOW_STATUS fails.
hdr=$(mktemp) || exit 1
`+shQuote(paths["curl"])+` -D "$hdr" "$@"
rc=$?
status=$(awk '/^HTTP\//{s=$2} END{print s}' "$hdr")
rm -f "$hdr"
[ "$rc" -eq 0 ] || exit "$rc"
case "$status" in ""|1??|2??|3??) exit 0;; esac
for s in $DOCTEST_ALLOW_STATUS; do [ "$s" = "$status" ] && exit 0; done
echo "doctest: curl got HTTP $status (allowed: 1xx-3xx${DOCTEST_ALLOW_STATUS:+ $DOCTEST_ALLOW_STATUS}; annotate the block run status=$status if the doc shows it on purpose)" >&2
exit 22
`)
	writeScript(t, filepath.Join(h.bin, "opa"), "#!/bin/sh\nDOCTEST_OPA=1 exec "+shQuote(self)+` "$@"`+"\n")
	h.path = h.bin + string(os.PathListSeparator) + os.Getenv("PATH")

	h.gwDir = filepath.Join(h.tmpRoot, "gateway")
	h.copyInputs(t, h.gwDir)
	h.start(t)
	return h
}

func writeScript(t *testing.T, path, text string) {
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// copyInputs copies what snippets read into dir: the shipped config/ and
// rego/ (without Go files and test data) and docs/examples/.
func (h *harness) copyInputs(t *testing.T, dir string) {
	for _, d := range []string{"config", "rego", "docs/examples"} {
		if err := copyTree(filepath.Join(h.root, filepath.FromSlash(d)), filepath.Join(dir, filepath.FromSlash(d))); err != nil {
			t.Fatal(err)
		}
	}
}

// start runs the built gateway on a free port and waits for /readyz. The
// port is free when chosen, not necessarily when the gateway binds it: a
// gateway that exits at start is tried again, on another port.
func (h *harness) start(t *testing.T) {
	var err error
	for range 3 {
		if err = h.tryStart(t); err == nil {
			return
		}
	}
	t.Fatal(err)
}

func (h *harness) tryStart(t *testing.T) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	h.addr = l.Addr().String()
	l.Close()
	logf, err := os.Create(filepath.Join(h.tmpRoot, "gateway.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(h.bin, "gateway"), "serve", "--listen", h.addr)
	cmd.Dir = h.gwDir
	cmd.Stdout, cmd.Stderr = logf, logf
	// The docs' calls go to the mock; a developer's own provider key must
	// not send them to OpenAI.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_API_KEY=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
	}
	log := func() string { b, _ := os.ReadFile(logf.Name()); return clip(b) }
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			logf.Close()
			return fmt.Errorf("the gateway exited at start: %v\n%s", err, log())
		default:
		}
		resp, err := http.Get("http://" + h.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Cleanup(stop)
				return nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("the gateway was not ready within 20s\n%s", log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runFile runs one file's run and config blocks in order, in a working
// directory of its own that they share (a key one block writes, the next one
// reads), and checks each response block against the run block before it.
func (h *harness) runFile(t *testing.T, blocks []block) {
	var wd string
	var prevOut []byte
	prevOK := false
	for _, b := range blocks {
		if b.kind != "run" && b.kind != "config" && b.kind != "response" {
			continue
		}
		if wd == "" {
			wd = filepath.Join(h.tmpRoot, "work", strings.NewReplacer("/", "_", ".", "_").Replace(b.file))
			h.copyInputs(t, wd)
			if err := snapshotTrail(filepath.Join(h.gwDir, "data", "audit"), filepath.Join(wd, "data", "audit")); err != nil {
				t.Fatal(err)
			}
		}
		switch b.kind {
		case "run":
			prevOut, prevOK = nil, false
			out, err := h.runBlock(b, wd)
			if err != nil {
				t.Errorf("%s: %v", b.where(), err)
				continue
			}
			prevOut, prevOK = out, true
		case "config":
			if err := h.checkConfig(b); err != nil {
				t.Errorf("%s: %v", b.where(), err)
			}
		case "response":
			if !prevOK {
				continue // the run block's failure is reported
			}
			real, err := lastJSON(prevOut)
			if err != nil {
				t.Errorf("%s: the run block before this response: %v\n%s", b.where(), err, clip(prevOut))
				continue
			}
			doc, _, _ := readJSON(b.text)
			if diffs := shapeDiffs("$", doc, real, b.arg == "complete"); len(diffs) > 0 {
				got, _ := json.MarshalIndent(real, "", "  ")
				t.Errorf("%s: the example is not the shape of the real answer:\n  %s\nthe real answer:\n%s",
					b.where(), strings.Join(diffs, "\n  "), clip(got))
			}
		}
	}
}

var (
	goRunGateway = regexp.MustCompile(`\bgo run \./cmd/gateway\b`)
	goRunOPA     = regexp.MustCompile(`\bgo run github\.com/open-policy-agent/opa@(\S+)`)
	goCommand    = regexp.MustCompile(`(^|[;&|(\s])go\s+(run|build|install|test|get|mod)\b`)
	gatewayURL   = regexp.MustCompile(`\b(localhost|127\.0\.0\.1):8080\b`)
)

// runBlock runs one sh block with bash -e -o pipefail in wd and returns its
// stdout. Before it runs, the text is rewritten:
//
//   - "go run ./cmd/gateway" becomes "gateway", the binary built once;
//   - "go run github.com/open-policy-agent/opa@vX" becomes "opa" (opa_test.go),
//     if vX is go.mod's version of OPA;
//   - "localhost:8080" and "127.0.0.1:8080" become the test gateway's address.
//
// Any other go command is refused (skip the block, saying why). PATH starts
// with gateway, opa and a curl that fails on a status outside 1xx-3xx and
// the block's status=... list (it reads the status with -D, which a block's
// own curl therefore cannot use). The block passes when it exits 0 within
// blockTimeout. Lines starting with "# " are shell comments: the output the
// docs show there is for readers, not checked; a response block is how an
// answer is checked.
func (h *harness) runBlock(b block, wd string) ([]byte, error) {
	script := goRunGateway.ReplaceAllString(b.text, "gateway")
	var versionErr error
	script = goRunOPA.ReplaceAllStringFunc(script, func(m string) string {
		if v := goRunOPA.FindStringSubmatch(m)[1]; v != h.opa {
			versionErr = fmt.Errorf("the block runs opa@%s, go.mod has %s: use the same version", v, h.opa)
		}
		return "opa"
	})
	if versionErr != nil {
		return nil, versionErr
	}
	if m := goCommand.FindString(script); m != "" {
		return nil, fmt.Errorf("a run block may use go only as \"go run ./cmd/gateway\" or \"go run github.com/open-policy-agent/opa@VERSION\", not %q: skip it, saying why", strings.TrimSpace(m))
	}
	script = gatewayURL.ReplaceAllString(script, h.addr)
	statuses, _ := allowedStatuses(b.arg)

	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = wd
	cmd.Env = append(os.Environ(), "PATH="+h.path, "DOCTEST_ALLOW_STATUS="+strings.Join(statuses, " "))
	cmd.WaitDelay = 2 * time.Second // a child still holding the pipes after bash ends
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after %s", blockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("the block failed: %v\n--- the block as run:\n%s--- stdout:\n%s\n--- stderr:\n%s", err, script, clip(stdout.Bytes()), clip(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// allowedStatuses reads "status=422,404" from a run annotation.
func allowedStatuses(arg string) ([]string, error) {
	if arg == "" {
		return nil, nil
	}
	list, ok := strings.CutPrefix(arg, "status=")
	if !ok {
		return nil, fmt.Errorf("run takes nothing or status=CODE[,CODE], not %q", arg)
	}
	codes := strings.Split(list, ",")
	for _, c := range codes {
		if len(c) != 3 || c[0] < '1' || c[0] > '5' || strings.Trim(c, "0123456789") != "" {
			return nil, fmt.Errorf("run status=%s: %q is not an HTTP status", list, c)
		}
	}
	return codes, nil
}

// checkConfig puts a yaml block as config/NAME of a copy of the shipped
// configuration and runs "gateway config check" on it.
func (h *harness) checkConfig(b block) error {
	dir, err := os.MkdirTemp(h.tmpRoot, "config")
	if err != nil {
		return err
	}
	for _, d := range []string{"config", "rego"} {
		if err := copyTree(filepath.Join(h.root, d), filepath.Join(dir, d)); err != nil {
			return err
		}
	}
	name := filepath.Join(dir, "config", b.arg)
	if _, err := os.Stat(name); err != nil {
		return fmt.Errorf("config/%s is not a file of the shipped configuration", b.arg)
	}
	if err := os.WriteFile(name, []byte(b.text), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(h.bin, "gateway"), "config", "check", "--config", filepath.Join(dir, "config"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("as config/%s, gateway config check fails: %v\n%s", b.arg, err, clip(out))
	}
	return nil
}

// copyTree copies the files of src to dst, without Go files and test data.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && e.Name() == "testdata" {
			return filepath.SkipDir
		}
		if e.IsDir() || strings.HasSuffix(p, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, raw, 0o644)
	})
}

// snapshotTrail copies the running gateway's audit trail for the snippets
// that verify or export one, consistently although the gateway may be
// writing: the checkpoints first, then the segments (so every checkpoint's
// entry is in the copy), each cut after its last whole line. The lock file
// is not copied.
func snapshotTrail(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	var first, then []string
	for _, e := range entries {
		switch n := e.Name(); {
		case strings.HasSuffix(n, ".checkpoints.jsonl"):
			first = append(first, n)
		case strings.HasSuffix(n, ".jsonl"):
			then = append(then, n)
		}
	}
	for _, n := range append(first, then...) {
		raw, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			return err
		}
		raw = raw[:bytes.LastIndexByte(raw, '\n')+1]
		if err := os.WriteFile(filepath.Join(dst, n), raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}
