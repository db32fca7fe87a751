package policy

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// point indexes the decision points in a prepared set.
type point int

const (
	ptApproval point = iota
	ptChat
	ptGuardrails
	ptSpawn
	ptMessages
	ptWorkflow
	ptSignedURL
	ptMCP
	ptMCPClients
	numPoints
)

// queries are the decision rules of the Rego decision points
// (docs/reference.md), one prepared query each.
var queries = [numPoints]string{
	ptApproval:   "data.gateway.approval.decision",
	ptChat:       "data.gateway.chat.deny",
	ptGuardrails: "data.gateway.guardrails.response",
	ptSpawn:      "data.gateway.spawn.decision",
	ptMessages:   "data.gateway.messages.deny",
	ptWorkflow:   "data.gateway.workflow.allow",
	ptSignedURL:  "data.gateway.workflow.signed_url_allowed",
	ptMCP:        "data.gateway.mcp.decision",
	ptMCPClients: "data.gateway.mcp_clients.allow",
}

var pointNames = [numPoints]string{
	ptApproval:   PointApproval,
	ptChat:       PointChat,
	ptGuardrails: PointGuardrails,
	ptSpawn:      PointSpawn,
	ptMessages:   PointMessages,
	ptWorkflow:   PointWorkflow,
	ptSignedURL:  PointSignedURL,
	ptMCP:        PointMCP,
	ptMCPClients: PointMCPClients,
}

// regoFile is one policy file as read from a directory.
type regoFile struct {
	rel  string // slash-separated, relative to the directory
	name string // as shown in errors: the directory joined with rel
	data []byte
}

// prepared is one compiled policy directory: immutable once built, shared by
// every evaluation that loaded it from the engine's atomic pointer.
type prepared struct {
	revision string
	files    []string
	compiler *ast.Compiler
	store    storage.Store
	// txn is one read transaction on store, shared by every evaluation:
	// nothing writes the store once the set is built (it holds no data
	// documents), and reading it concurrently is safe.
	txn     storage.Transaction
	queries [numPoints]query
	// defined are the decision points that answered the smoke test's
	// sample input.
	defined [numPoints]bool
	// inputFree are the decision points whose value cannot depend on the
	// input (inputFree); constant holds the value of each, once the smoke
	// test has computed it without error.
	inputFree [numPoints]bool
	constant  [numPoints]*any
	// partialOK are the decision points partial evaluation may decide per
	// agent (partialSafe).
	partialOK [numPoints]bool
	fast      fastPaths
}

// readFiles returns the policy files of fsys, sorted by path: every *.rego
// except *_test.rego, in every subdirectory. Names starting with "." are
// skipped (editor files; Kubernetes' ..data directories of a mounted
// ConfigMap, whose files are reached through the symlinks beside them).
// display is prefixed to paths for error messages.
func readFiles(fsys fs.FS, display string) ([]regoFile, error) {
	var files []regoFile
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != "." && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !isPolicyFile(name) {
			return nil
		}
		if !d.Type().IsRegular() {
			// A symlink (ConfigMap) or other: load it if it leads to a file.
			fi, err := fs.Stat(fsys, p)
			if err != nil {
				return fmt.Errorf("%s: %w", path.Join(display, p), err)
			}
			if !fi.Mode().IsRegular() {
				return nil
			}
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(display, filepath.FromSlash(p)), err)
		}
		files = append(files, regoFile{rel: p, name: filepath.Join(display, filepath.FromSlash(p)), data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	return files, nil
}

// isPolicyFile: a .rego file that is not a test.
func isPolicyFile(name string) bool {
	return strings.HasSuffix(name, ".rego") && !strings.HasSuffix(name, "_test.rego")
}

// revisionOf is the SHA-256 over the files sorted by path: each path and
// content, length-prefixed so that no two file sets hash alike.
func revisionOf(files []regoFile) string {
	h := sha256.New()
	var n [8]byte
	for _, f := range files {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.rel)))
		h.Write(n[:])
		h.Write([]byte(f.rel))
		binary.BigEndian.PutUint64(n[:], uint64(len(f.data)))
		h.Write(n[:])
		h.Write(f.data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// compile parses and compiles the files once and prepares one query per
// decision point. The error lists every problem as "file:line: message".
func compile(ctx context.Context, files []regoFile) (*prepared, error) {
	if len(files) == 0 {
		return nil, errors.New("no .rego files found")
	}
	popts := ast.ParserOptions{ProcessAnnotation: true, RegoVersion: ast.RegoV1}
	modules := make(map[string]*ast.Module, len(files))
	var perrs ast.Errors
	for _, f := range files {
		m, err := ast.ParseModuleWithOpts(f.name, string(f.data), popts)
		if err != nil {
			var errs ast.Errors
			if errors.As(err, &errs) {
				perrs = append(perrs, errs...)
				continue
			}
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		if m == nil {
			perrs = append(perrs, ast.NewError(ast.ParseErr, &ast.Location{File: f.name, Row: 1}, "empty module"))
			continue
		}
		modules[f.name] = m
	}
	if len(perrs) > 0 {
		return nil, perrs
	}
	compiler := ast.NewCompiler().
		WithEnablePrintStatements(false).
		WithCapabilities(ast.CapabilitiesForThisVersion())
	if compiler.Compile(modules); compiler.Failed() {
		return nil, compiler.Errors
	}
	store := inmem.New()
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, fmt.Errorf("policy store: %w", err)
	}
	p := &prepared{revision: revisionOf(files), files: make([]string, len(files)), compiler: compiler, store: store, txn: txn}
	for i, f := range files {
		p.files[i] = f.rel
	}
	for pt := range numPoints {
		q, err := compileQuery(compiler, queries[pt])
		if err != nil {
			return nil, fmt.Errorf("prepare %s: %w", queries[pt], err)
		}
		p.queries[pt] = q
		p.inputFree[pt] = inputFree(compiler, queries[pt])
		p.partialOK[pt] = partialSafe(compiler, queries[pt])
	}
	return p, nil
}

// query is one decision point compiled once for evaluation: body binds the
// decision rule's value to result.
type query struct {
	qc     ast.QueryCompiler
	body   ast.Body
	result ast.Var
}

// resultVar is the variable a compiled decision query binds the decision's
// value to.
const resultVar = ast.Var("decision")

// compileQuery compiles "decision = <ref>" against c. The gateway
// evaluates these with topdown directly rather than through rego's
// PreparedEvalQuery: that wrapper opens a store transaction, builds an
// evaluation context and a result set per call (about a fifth of a small
// decision's allocations), none of which a fixed query on a data-less store
// needs.
func compileQuery(c *ast.Compiler, ref string) (query, error) {
	body, err := ast.ParseBodyWithOpts(string(resultVar)+" = "+ref, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return query{}, err
	}
	qc := c.QueryCompiler().WithEnablePrintStatements(false).WithStrict(false)
	compiled, err := qc.Compile(body)
	if err != nil {
		return query{}, err
	}
	result := resultVar
	for rewritten, original := range qc.RewrittenVars() {
		if original == resultVar {
			result = rewritten
		}
	}
	return query{qc: qc, body: compiled, result: result}, nil
}

// sampleAgent is the agent of the smoke test's inputs.
var sampleAgent = map[string]any{"id": "sample-agent", "type": "sample", "capabilities": []any{"read"}, "allowed_targets": []any{"code"},
	"models": []any{}, "response_format": "none", "messages": []any{}}

// samples are inputs of the shapes the gateway sends each decision point
// (docs/reference.md, Rego decision points), for the smoke test.
var samples = [numPoints]map[string]any{
	ptApproval: {"agent": sampleAgent, "authz": map[string]any{"allowed": true, "reason": ""}, "known_references": []any{},
		"protocol": map[string]any{"version": "1.0", "limits": map[string]any{"max_content_size": 102400, "max_references": 20, "max_deviations": 5, "max_retry_attempts": 3},
			"compliance": map[string]any{"strict_mode": true, "allow_deviations": false, "require_rationale": true, "enforce_references": true}},
		"request": map[string]any{"agent_id": "sample-agent", "request_type": "QUERY", "action": "read", "target_type": "code", "target_path": "src/sample.go"}},
	ptChat: {"agent": sampleAgent, "model": "sample-model", "dialect": "chat",
		"request": map[string]any{"model": "sample-model", "messages": []any{map[string]any{"role": "user", "content": "hello"}}}},
	ptGuardrails: {"agent": sampleAgent, "response": map[string]any{"thought": "sample", "status": "success", "data": map[string]any{}, "message": "hello"}},
	ptSpawn: {"agent": sampleAgent, "message": map[string]any{"g": "SPAWN_AGENT", "plan": []any{}},
		"spawn": map[string]any{"agent_name": "sample-spawn", "tool": "SAMPLE_TOOL", "verb": "check", "description": "",
			"inputs": []any{}, "outputs": []any{}, "missing_capability": "", "endpoint": ""}},
	ptMessages: {"agent": sampleAgent, "authz": map[string]any{"allowed": true, "reason": ""},
		"message":   map[string]any{"sender": "sample-agent", "recipient": "other-agent", "action": "ping", "type": "EVENT", "payload": map[string]any{}},
		"recipient": map[string]any{"id": "other-agent", "supported_verbs": []any{}}},
	ptWorkflow: {"agent": sampleAgent, "workflow": map[string]any{"name": "sample-workflow", "callers": []any{"sample-agent"}},
		"input": map[string]any{}},
	ptSignedURL: {"agent": sampleAgent, "workflow": map[string]any{"name": "sample-workflow", "callers": []any{"sample-agent"}},
		"node": "sample-node", "url": map[string]any{"raw": "https://files.example.com/a.pdf?sig=x", "host": "files.example.com", "path": "/a.pdf"}},
	ptMCP: {"agent": sampleAgent, "server": "sample-server", "method": "tools/call", "arguments": map[string]any{"path": "a.txt"},
		"tool":  map[string]any{"name": "read_file", "description": "Reads a file.", "annotations": map[string]any{"readOnlyHint": true}},
		"authz": map[string]any{"allowed": true, "reason": ""}},
	ptMCPClients: {"agent": sampleAgent, "server": "sample-server", "client": map[string]any{"id": "sample-client", "name": "Sample", "redirect_host": "127.0.0.1"},
		"person": map[string]any{"subject": "sample-subject", "email": "sample@example.org", "groups": []any{"sample-group"}, "admin": false, "reviewer": false,
			"team_owner": []any{}, "team_reviewer": []any{}}},
}

// smokeTest evaluates every decision point of p once on a sample input. A
// policy that compiles but raises an error there, or leaves undefined a
// decision the running policy (prev) answers, would deny or reject
// everything once loaded while /readyz said ready: it is refused, and the
// last good policy keeps deciding. With no prev (startup) an undefined
// decision is allowed: a policy set need not answer every point, and those
// it does not answer fail closed.
func smokeTest(ctx context.Context, p, prev *prepared, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	var errs []string
	for pt := range numPoints {
		in, err := ast.InterfaceToValue(samples[pt])
		if err != nil {
			return fmt.Errorf("sample input of %s: %w", queries[pt], err)
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		out := evalPrepared(ctx, p, pt, in)
		cancel()
		p.defined[pt] = out.err == nil
		if out.err == nil && p.inputFree[pt] {
			v := out.value
			p.constant[pt] = &v
		}
		switch {
		case out.err == nil:
		case out.rule == RulePolicyUndefined && (prev == nil || !prev.defined[pt]):
		case out.rule == RulePolicyUndefined:
			errs = append(errs, fmt.Sprintf("%s is undefined on a sample input, and the running policy defines it", queries[pt]))
		default:
			errs = append(errs, fmt.Sprintf("%s fails on a sample input: %v", queries[pt], out.err))
		}
	}
	if len(errs) > 0 {
		return errors.New("the policies do not evaluate: " + strings.Join(errs, "; "))
	}
	return nil
}

// errorText renders a load error with one "file:line: message" per line.
func errorText(err error) string {
	var errs ast.Errors
	if errors.As(err, &errs) {
		errs.Sort()
		lines := make([]string, len(errs))
		for i, e := range errs {
			lines[i] = e.Error()
		}
		return strings.Join(lines, "\n")
	}
	return err.Error()
}
