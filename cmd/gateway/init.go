package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	gateway "github.com/sacpgw/gateway"
	"github.com/sacpgw/gateway/app"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	policyfs "github.com/sacpgw/gateway/rego"
)

// initMain is "gateway init [DIR]": the shipped configuration, written to
// DIR (default config) with fresh tokens in place of the published demo
// ones and the shipped policies in DIR/rego, checked as config check
// checks it. It refuses a DIR that exists and is not empty.
func initMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("init", stderr)
	if code, ok := parseArgs(fs, args, 1, stderr); !ok {
		return code
	}
	dir := "config"
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	if err := emptyOrAbsent(dir); err != nil {
		fmt.Fprintf(stderr, "gateway init: %v\n", err)
		return exitFailed
	}
	_, statErr := os.Stat(dir)
	existed := statErr == nil
	files, tokens, err := initFiles()
	if err != nil {
		fmt.Fprintf(stderr, "gateway init: %v\n", err)
		return exitFailed
	}
	if err := writeTree(dir, files, existed); err != nil {
		fmt.Fprintf(stderr, "gateway init: %v\n", err)
		return exitFailed
	}
	cfg, err := config.Load(dir)
	if err == nil {
		err = app.Check(cfg)
	}
	if err != nil {
		// Never leave a configuration that does not start behind.
		reportConfig(stderr, err)
		removeTree(dir, slices.Collect(maps.Keys(files)), existed)
		fmt.Fprintf(stderr, "gateway init: the written configuration does not check; nothing was kept in %s\n", dir)
		return exitFailed
	}
	printInit(stdout, cfg, tokens)
	return exitOK
}

// emptyOrAbsent refuses to write into a directory that holds anything.
func emptyOrAbsent(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty: refusing to overwrite it (name another directory: gateway init DIR)", dir)
	}
	return nil
}

// initFiles is the tree init writes, by slash-separated path, and the
// tokens it made (token by hex sha256). Each token_sha256 of the shipped
// files is replaced: a published demo token's by a fresh token's hash (the
// token is printed once), any other by the hash of a random value nobody
// keeps, as the shipped workflow agents' are.
func initFiles() (map[string][]byte, map[string]string, error) {
	files := map[string][]byte{}
	if err := copyFS(files, gateway.ShippedConfig(), ".", ""); err != nil {
		return nil, nil, err
	}
	if err := copyFS(files, policyfs.FS, "gateway", "rego/gateway"); err != nil {
		return nil, nil, err
	}
	if err := rewriteGatewayYAML(files); err != nil {
		return nil, nil, err
	}
	if err := rewriteAgentsYAML(files); err != nil {
		return nil, nil, err
	}
	// The workflow example's curl, as the person who ran init would type it.
	if err := replaceOnce(files, config.WorkflowsFile, "Bearer gw-demo-claude-3", "Bearer <the token gateway init printed for claude-3>"); err != nil {
		return nil, nil, err
	}
	tokens := map[string]string{}
	for _, name := range []string{config.GatewayFile, config.AgentsFile} {
		files[name] = tokenHash.ReplaceAllFunc(files[name], func(m []byte) []byte {
			old := string(tokenHash.FindSubmatch(m)[1])
			token := newInitToken()
			sum := roster.HashTokenHex(token)
			if config.IsDemoHash(old) {
				tokens[sum] = token
			}
			return []byte(`token_sha256: "` + sum + `"`)
		})
	}
	for name, b := range files {
		if bytes.Contains(b, []byte("gw-demo-")) || bytes.Contains(b, []byte("DEMO")) {
			return nil, nil, fmt.Errorf("%s still names a demo token after init's rewrite: update cmd/gateway/init.go for the shipped file", name)
		}
	}
	return files, tokens, nil
}

var tokenHash = regexp.MustCompile(`token_sha256: "([0-9a-f]{64})"`)

// newInitToken is a fresh bearer token: 256 bits from crypto/rand.
func newInitToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return "gw-" + base64.RawURLEncoding.EncodeToString(b[:])
}

// copyFS adds every file under root of src to files, under prefix.
func copyFS(files map[string][]byte, src fs.FS, root, prefix string) error {
	return fs.WalkDir(src, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, p)
		if err != nil {
			return fmt.Errorf("shipped file %s: %w", p, err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		files[path.Join(prefix, rel)] = b
		return nil
	})
}

// replaceOnce replaces old, which must occur exactly once in file: a
// shipped file that no longer matches fails init's tests rather than
// writing a configuration that points at the repository's layout.
func replaceOnce(files map[string][]byte, file, old, new string) error {
	if n := bytes.Count(files[file], []byte(old)); n != 1 {
		return fmt.Errorf("shipped %s: %q occurs %d times, want once: update cmd/gateway/init.go", file, old, n)
	}
	files[file] = bytes.Replace(files[file], []byte(old), []byte(new), 1)
	return nil
}

// rewriteGatewayYAML points the shipped gateway.yaml, written for the
// repository (../rego, ../data), at the written tree: DIR/rego and
// DIR/data, and drops its demo-token comments.
func rewriteGatewayYAML(files map[string][]byte) error {
	const f = config.GatewayFile
	for _, r := range [][2]string{
		{"(here:\n# ../rego is the repository's rego/)", "(here:\n# rego is the policies gateway init wrote beside this file)"},
		// The padding keeps the comments after them aligned.
		{"dir: ../rego", "dir: rego   "},
		{"dir: ../data/audit", "dir: data/audit   "},
		{"dir: ../data/state", "dir: data/state   "},
	} {
		if err := replaceOnce(files, f, r[0], r[1]); err != nil {
			return err
		}
	}
	var out []string
	for line := range strings.Lines(string(files[f])) {
		if !strings.HasPrefix(strings.TrimSpace(line), "# DEMO") {
			out = append(out, line)
		}
	}
	files[f] = []byte(strings.Join(out, ""))
	return nil
}

// rewriteAgentsYAML replaces the shipped agents.yaml's note on the demo
// tokens.
func rewriteAgentsYAML(files map[string][]byte) error {
	const f = config.AgentsFile
	b := string(files[f])
	start := strings.Index(b, "# DEMO TOKENS:")
	end := strings.Index(b, "is active.\n")
	if start < 0 || end < start {
		return fmt.Errorf("shipped %s: no demo token note to replace: update cmd/gateway/init.go", f)
	}
	files[f] = []byte(b[:start] + "# Tokens: made by gateway init and printed once; only their sha256 is kept here.\n" + b[end+len("is active.\n"):])
	return nil
}

// writeTree writes files under dir, never over an existing file; on a
// failure it removes what it wrote (and dir, unless it existed).
func writeTree(dir string, files map[string][]byte, existed bool) error {
	names := slices.Sorted(maps.Keys(files))
	for i, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		err := os.MkdirAll(filepath.Dir(p), 0o750)
		if err == nil {
			err = writeNew(p, files[name])
		}
		if err != nil {
			removeTree(dir, names[:i], existed)
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}

func writeNew(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// removeTree removes the written files and then every directory that is
// left empty, dir too unless it existed before.
func removeTree(dir string, names []string, existed bool) {
	dirs := map[string]bool{}
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		_ = os.Remove(p)
		for d := filepath.Dir(p); d != dir && d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	// Deepest first, so a parent is empty by the time it is tried.
	ds := slices.Collect(maps.Keys(dirs))
	slices.SortFunc(ds, func(a, b string) int { return len(b) - len(a) })
	if !existed {
		ds = append(ds, dir)
	}
	for _, d := range ds {
		_ = os.Remove(d) // fails, harmlessly, on a directory that is not empty
	}
}

// printInit says what was written and shows the fresh tokens, once.
func printInit(w io.Writer, cfg *config.Config, tokens map[string]string) {
	fmt.Fprintf(w, "wrote a configuration to %s (%d agents, %d upstreams; policies in %s)\n", cfg.Dir, len(cfg.Agents), len(cfg.Gateway.Upstreams), cfg.Gateway.Policy.Dir)
	fmt.Fprintln(w, "tokens (shown only now; the files keep their sha256 only):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	show := func(who, sum string) {
		if t, ok := tokens[sum]; ok {
			fmt.Fprintf(tw, "  %s\t%s\n", who, t)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(cfg.Agents)) {
		show("agent "+id, cfg.Agents[id].TokenSHA256)
	}
	show("admin", cfg.Gateway.Admin.TokenSHA256)
	for _, r := range cfg.Gateway.Admin.Reviewers {
		show("reviewer "+r.Name, r.TokenSHA256)
	}
	_ = tw.Flush()
	start := "gateway serve --config " + cfg.Dir
	if filepath.Clean(cfg.Dir) == "config" {
		start = "gateway   (from this folder; elsewhere: gateway serve --config " + cfg.Dir + ")"
	}
	fmt.Fprintf(w, "start it: %s\n", start)
	url := app.LocalURL(cfg.Gateway.Listen, cfg.Gateway.TLS.CertFile != "")
	fmt.Fprintf(w, "then open %s/ in a browser; agents use %s/v1 with their token as the API key\n", url, url)
}
