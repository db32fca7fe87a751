package policy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/sacpgw/gateway/policy/bundle"
)

// ErrClosed is returned by Ready after Close.
var ErrClosed = errors.New("policy engine closed")

// Options configure an Engine. Dir (or FS) is required; everything else has
// a working zero value.
type Options struct {
	// Dir is the policy directory: every *.rego below it (subdirectories
	// included, *_test.rego and names starting with "." excluded) is loaded.
	// Changes are picked up by a file watcher unless NoWatch is set.
	Dir string
	// FS is used instead of Dir when Dir is empty, e.g. the policies built
	// into the binary (package policyfs). An FS is never watched.
	FS fs.FS
	// Bundle, when set, is the source of the live policies instead of Dir
	// and FS: a signed OPA bundle, fetched before New returns and then
	// polled (unless NoWatch) on its interval.
	Bundle *bundle.Source
	// ShadowDir holds candidate policies evaluated beside the live ones
	// without effect. Empty: no shadow evaluation.
	ShadowDir string
	// Logger receives reload results and compiler errors. Nil: slog.Default().
	Logger *slog.Logger
	// OnReload is called after every reload attempt of Dir or ShadowDir
	// (not for the initial load in New), from the watcher's goroutine or
	// from Reload's caller. Nil: not called.
	OnReload func(ReloadEvent)
	// OnShadowDisagreement is called, from the shadow worker goroutine,
	// for each decision on which the shadow policies disagree with the
	// live ones. Nil: only counted.
	OnShadowDisagreement func(ShadowEvent)
	// NoWatch disables hot reload (tools such as config check).
	NoWatch bool
	// SkipSmokeTest loads policies without evaluating each decision point
	// on a sample input first (tests of the engine's own fail-closed
	// behaviour on policies that error).
	SkipSmokeTest bool
	// Debounce is how long the watcher waits after the last change before
	// reloading, so that an editor's rename-and-create lands as one reload.
	// Zero: 200ms.
	Debounce time.Duration
	// ShadowQueue bounds the decisions waiting for shadow evaluation; when
	// it is full new ones are dropped and counted. Zero: 1024.
	ShadowQueue int
	// Timeout bounds one evaluation (protocol.yaml timeouts.validation) when
	// the caller's context has no earlier deadline. Zero: the context only.
	Timeout time.Duration

	// noPartial evaluates every decision in full (the differential tests'
	// reference).
	noPartial bool
}

// Engine evaluates the Rego decision points (docs/reference.md) against the
// policies of a directory. It is safe for concurrent use; evaluation never
// waits for a reload: each call uses the prepared set current when it started.
type Engine struct {
	opts Options
	log  *slog.Logger

	live   atomic.Pointer[prepared]
	shadow atomic.Pointer[prepared]

	// reloadMu serializes reloads and guards the two failed flags.
	reloadMu     sync.Mutex
	liveFailed   bool
	shadowFailed bool
	lastErr      atomic.Pointer[string]

	bundle bundleState

	reloads, reloadFailures             atomic.Uint64
	shadowReloads, shadowReloadFailures atomic.Uint64
	decisions, failClosed               atomic.Uint64
	shadowEvals, shadowDisagreements    atomic.Uint64
	shadowDropped                       atomic.Uint64

	shadowJobs chan shadowJob
	ctx        context.Context // cancelled by Close: stops a running shadow evaluation
	cancel     context.CancelFunc
	done       chan struct{}
	wg         sync.WaitGroup
	closeOnce  sync.Once
	closed     atomic.Bool
}

// New loads and compiles the policies of o.Dir (and o.ShadowDir), prepares
// one query per decision point and, unless o.NoWatch, starts watching both
// directories. It fails with every compiler error ("file:line: message")
// when the policies do not compile: a gateway never starts without policy.
// A decision rule missing from the policies is not an error here; that
// decision point then fails closed.
func New(o Options) (*Engine, error) {
	if o.Dir == "" && o.FS == nil && o.Bundle == nil {
		return nil, errors.New("policy: no policy directory configured")
	}
	if o.Debounce <= 0 {
		o.Debounce = 200 * time.Millisecond
	}
	if o.ShadowQueue <= 0 {
		o.ShadowQueue = 1024
	}
	e := &Engine{opts: o, log: o.Logger, done: make(chan struct{})}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	if e.log == nil {
		e.log = slog.Default()
	}
	ctx := context.Background()
	p, err := e.loadLive(ctx)
	if err != nil {
		return nil, err
	}
	e.live.Store(p)
	if o.ShadowDir != "" {
		if err := checkDir(o.ShadowDir); err != nil {
			return nil, fmt.Errorf("policy: shadow: %w", err)
		}
		if o.Dir != "" && overlap(o.Dir, o.ShadowDir) {
			return nil, fmt.Errorf("policy: shadow dir %s and policy dir %s must not contain each other", o.ShadowDir, o.Dir)
		}
		sp, err := loadFS(ctx, os.DirFS(o.ShadowDir), o.ShadowDir)
		if err != nil {
			return nil, &LoadError{Dir: o.ShadowDir, Shadow: true, Text: errorText(err), Err: err}
		}
		e.shadow.Store(sp)
		e.shadowJobs = make(chan shadowJob, o.ShadowQueue)
		e.wg.Add(1)
		go e.shadowWorker()
	}
	if !o.NoWatch && (o.Dir != "" || o.ShadowDir != "") {
		if err := e.watch(); err != nil {
			e.Close()
			return nil, fmt.Errorf("policy: watch %s: %w", o.Dir, err)
		}
	}
	if !o.NoWatch && o.Bundle != nil {
		e.wg.Add(1)
		go e.bundleLoop()
	}
	return e, nil
}

// loadLive loads the policies New starts with: the bundle, or Dir (FS).
func (e *Engine) loadLive(ctx context.Context) (*prepared, error) {
	o := e.opts
	if o.Bundle != nil {
		p, err := e.firstBundle(ctx)
		if err != nil {
			return nil, &LoadError{Dir: o.Bundle.Display(), Text: errorText(err), Err: err}
		}
		return p, nil
	}
	fsys := o.FS
	if o.Dir != "" {
		if err := checkDir(o.Dir); err != nil {
			return nil, fmt.Errorf("policy: %w", err)
		}
		fsys = os.DirFS(o.Dir)
	}
	p, err := loadFS(ctx, fsys, displayDir(o.Dir))
	if err == nil && !o.SkipSmokeTest {
		err = smokeTest(ctx, p, nil, o.Timeout)
	}
	if err != nil {
		return nil, &LoadError{Dir: displayDir(o.Dir), Text: errorText(err), Err: err}
	}
	return p, nil
}

// LoadError is a policy directory that does not load: Text holds every
// problem as "file:line: message", one per line.
type LoadError struct {
	Dir    string
	Shadow bool
	Text   string
	Err    error
}

func (e *LoadError) Error() string {
	what := "policy"
	if e.Shadow {
		what = "shadow policy"
	}
	return fmt.Sprintf("%s %s: %s", what, e.Dir, e.Text)
}

func (e *LoadError) Unwrap() error { return e.Err }

// Check compiles the policies of dir without serving them, for config check
// and CI. It returns the revision, or a *LoadError.
func Check(dir string) (string, error) {
	e, err := New(Options{Dir: dir, NoWatch: true})
	if err != nil {
		return "", err
	}
	defer e.Close()
	return e.Revision(), nil
}

func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// overlap reports whether one directory contains the other.
func overlap(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return within(aa, ab) || within(ab, aa)
}

func displayDir(dir string) string {
	if dir == "" {
		return "embedded"
	}
	return dir
}

func loadFS(ctx context.Context, fsys fs.FS, display string) (*prepared, error) {
	files, err := readFiles(fsys, display)
	if err != nil {
		return nil, err
	}
	return compile(ctx, files)
}

// Revision is the SHA-256 (hex) of the live Rego files, sorted by path.
func (e *Engine) Revision() string { return e.live.Load().revision }

// ShadowRevision is the revision of the shadow policies, "" without any.
func (e *Engine) ShadowRevision() string {
	if p := e.shadow.Load(); p != nil {
		return p.revision
	}
	return ""
}

// Files are the live Rego files, relative to the policy directory.
func (e *Engine) Files() []string { return append([]string(nil), e.live.Load().files...) }

// Ready reports whether the engine serves decisions: nil after a successful
// New, ErrClosed after Close. A failed reload does not make it unready (the
// last good policies keep serving; see Stats).
func (e *Engine) Ready() error {
	if e.closed.Load() {
		return ErrClosed
	}
	if e.live.Load() == nil {
		return errors.New("policy: no policies loaded")
	}
	return nil
}

// ReloadProblem is why the last reload of the policy directory was
// rejected ("" when it loaded): the last good policies still decide, so the
// gateway stays ready, and /readyz says it.
func (e *Engine) ReloadProblem() string {
	if p := e.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// Close stops watching and the shadow worker. Decisions still work (with
// the last loaded policies) but no longer reload. Close is idempotent.
func (e *Engine) Close() {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		e.cancel()
		close(e.done)
		e.wg.Wait()
	})
}

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	s := Stats{
		Reloads:              e.reloads.Load(),
		ReloadFailures:       e.reloadFailures.Load(),
		ShadowReloads:        e.shadowReloads.Load(),
		ShadowReloadFailures: e.shadowReloadFailures.Load(),
		Decisions:            e.decisions.Load(),
		FailClosed:           e.failClosed.Load(),
		ShadowEvaluations:    e.shadowEvals.Load(),
		ShadowDisagreements:  e.shadowDisagreements.Load(),
		ShadowDropped:        e.shadowDropped.Load(),
		LastReloadOK:         true,
	}
	if p := e.lastErr.Load(); p != nil {
		s.LastReloadOK = false
		s.LastReloadError = *p
	}
	return s
}

// Approval evaluates data.gateway.approval.decision. The input is
// {request, agent, protocol, authz: {allowed, reason}, known_references}
// (see docs/policy-authoring.md).
//
// The returned decision is always usable: when the policy errors, is
// undefined or returns a malformed value it is "rejected" with a violation
// policy.error, policy.undefined or policy.malformed, FailClosed set and the
// cause in Error. The error is non-nil only when ctx was cancelled or its
// deadline passed (wrapping ctx.Err()), so that the caller can answer with a
// timeout rather than a policy verdict; the decision is then still the
// fail-closed rejection.
func (e *Engine) Approval(ctx context.Context, input map[string]any) (ApprovalDecision, error) {
	return decide(ctx, e, ptApproval, input, approvalFrom, approvalSummary)
}

// ChatDeny evaluates data.gateway.chat.deny for a chat request; input is
// {agent, request, model}. Deny with Reasons means 403 policy_denied.
// Failing closed denies with the cause as the reason; the error follows the
// rule of Approval.
func (e *Engine) ChatDeny(ctx context.Context, input map[string]any) (ChatDecision, error) {
	return decide(ctx, e, ptChat, input, chatDenyFrom, chatSummary)
}

// MessagesDeny evaluates data.gateway.messages.deny for an agent-to-agent
// envelope (POST /relay/messages); input is {agent, message, recipient,
// authz}. Deny with Reasons means 403 policy_denied; failing closed denies,
// and the error follows the rule of Approval.
func (e *Engine) MessagesDeny(ctx context.Context, input map[string]any) (ChatDecision, error) {
	return decide(ctx, e, ptMessages, input, messagesFrom, chatSummary)
}

// Guardrails evaluates data.gateway.guardrails.response for a validated
// SACP answer; input is {agent, response}. Failing closed is status
// "failure" with RedactMessage; the error follows the rule of Approval.
func (e *Engine) Guardrails(ctx context.Context, input map[string]any) (GuardrailDecision, error) {
	return decide(ctx, e, ptGuardrails, input, guardrailsFrom, guardrailsSummary)
}

// Spawn evaluates data.gateway.spawn.decision for a SPAWN_AGENT message;
// input is {agent, message}. Failing closed is "rejected"; the error follows
// the rule of Approval.
func (e *Engine) Spawn(ctx context.Context, input map[string]any) (SpawnDecision, error) {
	return decide(ctx, e, ptSpawn, input, spawnFrom, spawnSummary)
}

// Workflow evaluates data.gateway.workflow.allow for the start of a
// workflow run; input is {agent, workflow: {name, callers}, input}. Failing
// closed (an error, undefined, not a boolean) denies; the error follows the
// rule of Approval.
func (e *Engine) Workflow(ctx context.Context, input map[string]any) (WorkflowDecision, error) {
	return decide(ctx, e, ptWorkflow, input, workflowFrom, workflowSummary)
}

// SignedURL evaluates data.gateway.workflow.signed_url_allowed for a signed
// URL in a workflow step's data (binary data by reference); input is
// {agent, workflow: {name, callers}, node, url: {raw, host, path}}. Only
// true lets it pass; the error follows the rule of Approval.
func (e *Engine) SignedURL(ctx context.Context, input map[string]any) (WorkflowDecision, error) {
	return decide(ctx, e, ptSignedURL, input, workflowFrom, workflowSummary)
}

// decide is every decision point's path: it evaluates pt for input,
// decodes the outcome with from (which fails closed), and counts and
// shadows the decision by its summary.
func decide[D any](ctx context.Context, e *Engine, pt point, input map[string]any, from func(outcome) D, sum func(D) summary) (D, error) {
	in, out, err := e.evaluate(ctx, pt, input)
	d := from(out)
	e.afterLive(pt, in, out, sum(d))
	return d, err
}

// outcome is one raw evaluation.
type outcome struct {
	id       string
	revision string
	value    any   // the decision rule's value (JSON-like)
	err      error // evaluation or input error
	rule     string
}

// noMetrics spares each evaluation a metrics map.
var noMetrics = metrics.NoOp()

// evaluate converts the input once (the shadow evaluation reuses it) and
// evaluates the live set: the decision's value when it is known for this
// agent, its residual when partial evaluation left one, the whole policy
// otherwise.
func (e *Engine) evaluate(ctx context.Context, pt point, input map[string]any) (ast.Value, outcome, error) {
	p := e.live.Load()
	fp := fullPath
	if p.constant[pt] == nil && !e.opts.noPartial {
		fp = p.fastPathFor(pt, input)
	}
	if e.shadowJobs == nil && (p.constant[pt] != nil || fp.kind == pathConstant) {
		// Decided for every input, or for every input of this agent:
		// nothing to convert, nothing to evaluate.
		return nil, decided(p, pt, fp), nil
	}
	if out, ok := readerDecided(ctx, e, p, fp, input); ok {
		// Decided with the strict reader's guarantees; the shadow
		// policies, if any, still get the whole input.
		var in ast.Value
		if e.shadowJobs != nil {
			in, _ = inputValue(input)
		}
		return in, out, nil
	}
	var buf [128]byte
	key, memo := memoKey(buf[:0], fp, input)
	if v, ok := fp.memoized(key, memo); ok {
		var in ast.Value
		if e.shadowJobs != nil {
			in, _ = inputValue(input)
		}
		return in, outcome{id: newID(), revision: p.revision, value: v}, nil
	}
	// The bound comes only now: a decision known before the request came
	// (above) evaluates nothing, and a deadline would cost it a context
	// and a timer for nothing.
	ctx, cancel := e.bounded(ctx)
	defer cancel()
	in, err := inputValue(input)
	if err != nil {
		return nil, outcome{id: newID(), revision: p.revision, rule: RulePolicyError, err: fmt.Errorf("input: %w", err)}, nil
	}
	var out outcome
	switch fp.kind {
	case pathConstant:
		out = decided(p, pt, fp)
	case pathResidual:
		out = evalQuery(ctx, fp.residual.compiler, p, &fp.residual.q, pt, in)
		if out.err == nil && memo {
			fp.memo.remember(key, out.value)
		}
		if out.err != nil && ctx.Err() == nil {
			// A failing decision is evaluated again in full, so that the
			// cause it reports names the policy's own rules and lines.
			out = evalPrepared(ctx, p, pt, in)
		}
	default:
		out = evalPrepared(ctx, p, pt, in)
	}
	if out.err != nil && ctx.Err() != nil {
		return in, out, fmt.Errorf("policy %s: %w", pointNames[pt], ctx.Err())
	}
	return in, out, nil
}

// readerDecided is the outcome of a chat decision whose request the strict
// reader read (a ChatRequest), when the agent's residual under the
// reader's guarantees decides it; ok false otherwise.
func readerDecided(ctx context.Context, e *Engine, p *prepared, fp *fastPath, input map[string]any) (outcome, bool) {
	if fp.reader == nil {
		return outcome{}, false
	}
	req, isReq := input["request"].(ChatRequest)
	if !isReq || req.Messages < 1 {
		return outcome{}, false
	}
	v, ok := fp.reader.known(req.Messages)
	if !ok {
		// A number of messages not seen yet: the rewritten residual is
		// evaluated, within the engine's bound.
		ctx, cancel := e.bounded(ctx)
		defer cancel()
		v, ok = fp.reader.decide(ctx, p, req.Messages)
	}
	if !ok {
		return outcome{}, false
	}
	return outcome{id: newID(), revision: p.revision, value: v}, true
}

// bounded is ctx with the engine's evaluation timeout, unless ctx ends
// sooner already.
func (e *Engine) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if e.opts.Timeout > 0 {
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > e.opts.Timeout {
			return context.WithTimeout(ctx, e.opts.Timeout)
		}
	}
	return ctx, func() {}
}

// decided is the outcome of a decision known before the request came:
// every decision still has its own id and the revision that decided it.
func decided(p *prepared, pt point, fp *fastPath) outcome {
	out := outcome{id: newID(), revision: p.revision}
	if v := p.constant[pt]; v != nil {
		out.value = *v
	} else {
		out.value = fp.value
	}
	return out
}

// evalPrepared evaluates one decision point of p in full.
func evalPrepared(ctx context.Context, p *prepared, pt point, in ast.Value) outcome {
	if p.constant[pt] != nil {
		// The value cannot depend on the input: computed when the policies
		// loaded.
		return decided(p, pt, nil)
	}
	return evalQuery(ctx, p.compiler, p, &p.queries[pt], pt, in)
}

// evalQuery evaluates q, compiled by c, on the store of p.
func evalQuery(ctx context.Context, c *ast.Compiler, p *prepared, q *query, pt point, in ast.Value) outcome {
	out := outcome{id: newID(), revision: p.revision}
	if err := ctx.Err(); err != nil {
		out.rule, out.err = RulePolicyError, fmt.Errorf("evaluation not started: %w", err)
		return out
	}
	// AfterFunc cancels the query when ctx ends without a goroutine per
	// evaluation watching it.
	cancel := topdown.NewCancel()
	stop := context.AfterFunc(ctx, cancel.Cancel)
	tq := topdown.NewQuery(q.body).
		WithQueryCompiler(q.qc).
		WithCompiler(c).
		WithStore(p.store).
		WithTransaction(p.txn).
		WithMetrics(noMetrics).
		WithCancel(cancel)
	if in != nil {
		tq = tq.WithInput(ast.NewTerm(in))
	}
	var results int
	var value ast.Value
	err := tq.Iter(ctx, func(qr topdown.QueryResult) error {
		results++
		if t := qr[q.result]; t != nil {
			value = t.Value
		}
		return nil
	})
	stop()
	switch {
	case err != nil:
		if cerr := ctx.Err(); cerr != nil {
			err = fmt.Errorf("%w (%w)", err, cerr)
		}
		out.rule, out.err = RulePolicyError, err
	case results == 0:
		out.rule, out.err = RulePolicyUndefined, fmt.Errorf("%s is undefined", queries[pt])
	case results > 1:
		out.rule, out.err = RulePolicyError, fmt.Errorf("%s has %d results", queries[pt], results)
	case value == nil:
		out.rule, out.err = RulePolicyError, fmt.Errorf("%s: no value bound", queries[pt])
	default:
		out.value, err = ast.JSON(value)
		if err != nil {
			out.rule, out.err = RulePolicyError, fmt.Errorf("%s: %w", queries[pt], err)
		}
	}
	return out
}

// afterLive counts the decision and queues it for the shadow policies.
func (e *Engine) afterLive(pt point, in ast.Value, out outcome, live summary) {
	e.decisions.Add(1)
	if live.failClosed {
		e.failClosed.Add(1)
		e.log.Warn("policy decision failed closed", "point", pointNames[pt], "decision_id", out.id, "revision", out.revision, "error", live.cause)
	}
	if e.shadowJobs == nil || in == nil {
		return
	}
	select {
	case e.shadowJobs <- shadowJob{pt: pt, in: in, live: live, liveID: out.id, liveRevision: out.revision}:
	default:
		e.shadowDropped.Add(1)
	}
}

// newID is a random decision id: 16 bytes, hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
