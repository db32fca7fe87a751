// Package workflow runs chains of agents under governance: each step is a
// governed chat call of the node's agent (identity, limits, Rego, SACP
// validation, redaction, audit, exactly as an agent's own call), the
// answer's status and data choose the next node through the workflow's
// edges, a retry_with_instruction answer sends the run back to the previous
// node, and clarification_needed or WAITING_FOR_HUMAN suspends it until a
// person answers on the review page. Definitions come from
// workflow/definition; runs live in a Store shared by the replicas.
package workflow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/sacp"
	"github.com/sacpgw/gateway/workflow/definition"
)

// Audit entry kinds of workflow runs; every one carries run_id.
const (
	KindStart   = "workflow.start"
	KindStep    = "workflow.step"
	KindSuspend = "workflow.suspend"
	KindResume  = "workflow.resume"
	KindEnd     = "workflow.end"
)

// takeOverEvery is how often a replica looks for runs nobody advances.
const takeOverEvery = 2 * time.Second

// Call is one governed call of a node's agent.
type Call struct {
	Agent, Model, Input string
	RunID, Node         string
}

// Reply is the validated SACP answer of a Call.
type Reply struct {
	Answer    Answer
	RequestID string
}

// Caller makes governed calls as an agent (the gateway's own chat pipeline,
// in process).
type Caller interface {
	Call(ctx context.Context, c Call) (Reply, error)
}

// Decider decides who may start a run (data.gateway.workflow.allow) and
// which signed URLs may pass between its agents
// (data.gateway.workflow.signed_url_allowed).
type Decider interface {
	Workflow(ctx context.Context, input map[string]any) (policy.WorkflowDecision, error)
	SignedURL(ctx context.Context, input map[string]any) (policy.WorkflowDecision, error)
}

// Deps are what an Engine is built from.
type Deps struct {
	Definitions *definition.Set
	Store       Store
	Caller      Caller
	Policy      Decider
	// Steps counts the steps of each caller's runs against the
	// definitions' step_limit (the limiter of the agents' rate_limit,
	// memory or Redis, under StepsKey).
	Steps limit.Limiter
	// Escalator opens the reviews of suspended runs; nil: a run that asks
	// for a person fails, as nobody could answer.
	Escalator escalation.Opener
	Audit     *door.Recorder
	Log       *slog.Logger
	// Owner names this replica in leases (the audit chain id).
	Owner string
	// StepTimeout bounds a node's call when the node sets no timeout;
	// zero: 2 minutes.
	StepTimeout time.Duration
	// PolicyTimeout bounds the start decision and each edge condition;
	// zero: 5 seconds.
	PolicyTimeout time.Duration
	// Blobs keeps the binary values moved out of answers; nil: memory.
	Blobs BlobStore
	// MaxInlineBinary is the size (as written) above which a base64 value
	// in an answer's data is moved to Blobs; zero: 64 KiB.
	MaxInlineBinary int
}

// Engine starts, advances, suspends, resumes and cancels runs.
type Engine struct {
	defs          atomic.Pointer[definition.Set]
	store         Store
	caller        Caller
	policy        Decider
	steps         limit.Limiter
	escalator     escalation.Opener
	audit         *door.Recorder
	log           *slog.Logger
	owner         string
	stepTimeout   time.Duration
	policyTimeout time.Duration
	blobs         BlobStore
	maxInline     int
	now           func() time.Time
	leaseTTL      time.Duration

	base context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
	mu   sync.Mutex
	// running are the runs this replica is advancing, with the cancel of
	// their driver (a cancelled run stops its call at once).
	running map[string]context.CancelFunc
	// changed holds, per run a request waits for, a channel closed when
	// this replica changes the run (other replicas' changes are polled).
	changed map[string]chan struct{}
}

// New builds an engine; Run must be called for it to take over runs of
// other replicas, and Close stops its drivers.
func New(d Deps) (*Engine, error) {
	if d.Store == nil || d.Caller == nil || d.Policy == nil || d.Steps == nil || d.Log == nil {
		return nil, errors.New("workflow: Store, Caller, Policy, Steps and Log are required")
	}
	e := &Engine{store: d.Store, caller: d.Caller, policy: d.Policy, steps: d.Steps, escalator: d.Escalator, audit: d.Audit, log: d.Log,
		owner: d.Owner, stepTimeout: d.StepTimeout, policyTimeout: d.PolicyTimeout, blobs: d.Blobs, maxInline: d.MaxInlineBinary,
		now: time.Now, leaseTTL: 15 * time.Second,
		running: map[string]context.CancelFunc{}, changed: map[string]chan struct{}{}}
	if e.owner == "" {
		e.owner = "gateway-" + newID()[:8]
	}
	if e.stepTimeout <= 0 {
		e.stepTimeout = 2 * time.Minute
	}
	if e.policyTimeout <= 0 {
		e.policyTimeout = 5 * time.Second
	}
	if e.blobs == nil {
		e.blobs = NewMemoryBlobStore(0)
	}
	if e.maxInline <= 0 {
		e.maxInline = 64 << 10
	}
	defs := d.Definitions
	if defs == nil {
		defs = &definition.Set{}
	}
	e.defs.Store(defs)
	e.base, e.stop = context.WithCancel(context.Background())
	return e, nil
}

// Prepare takes the definitions of a new configuration (checked by its
// loader); runs in flight continue under the workflow of the same name in
// the new set, or fail if it is gone.
func (e *Engine) Prepare(cfg *config.Config) (func(), error) {
	defs := cfg.Workflows
	if defs == nil {
		defs = &definition.Set{}
	}
	return func() { e.defs.Store(defs) }, nil
}

// Definitions returns the current definitions.
func (e *Engine) Definitions() *definition.Set { return e.defs.Load() }

// Run takes over, until ctx ends, the runs in progress whose replica's
// lease lapsed (it stopped or died), then stops this replica's drivers.
func (e *Engine) Run(ctx context.Context) {
	// Often enough that a run whose replica stopped cleanly (its lease
	// released) continues within seconds; a dead replica's lease lapses
	// after leaseTTL.
	t := time.NewTicker(takeOverEvery)
	defer t.Stop()
	for {
		e.takeOver(ctx)
		select {
		case <-ctx.Done():
			e.Close()
			return
		case <-t.C:
		}
	}
}

// Close stops the drivers of this replica and waits for them; the runs stay
// IN_PROGRESS in the store, for another replica (or a restart) to continue.
func (e *Engine) Close() {
	e.stop()
	e.wg.Wait()
}

func (e *Engine) takeOver(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ids, err := e.store.Live(ctx)
	if err != nil {
		e.log.Warn("workflow runs: cannot list the runs in progress", "error", err.Error())
		return
	}
	for _, id := range ids {
		e.launch(id)
	}
}

// StartError is a start the caller may not make, or a workflow that does
// not exist.
type StartError struct {
	NotFound bool
	Reason   string
}

func (e *StartError) Error() string { return e.Reason }

// Start checks that agent may start workflow name with input, creates the
// run and starts advancing it.
func (e *Engine) Start(ctx context.Context, agent map[string]any, agentID, name string, input map[string]any) (*Run, error) {
	wf := e.defs.Load().Get(name)
	if wf == nil {
		return nil, &StartError{NotFound: true, Reason: fmt.Sprintf("There is no workflow %q.", name)}
	}
	if input == nil {
		input = map[string]any{}
	}
	pctx, cancel := context.WithTimeout(ctx, e.policyTimeout)
	d, err := e.policy.Workflow(pctx, map[string]any{
		"agent":    agent,
		"workflow": map[string]any{"name": wf.Name, "callers": anySlice(wf.Callers)},
		"input":    jsonValue(input),
	})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("workflow policy: %w", err)
	}
	if !d.Allow {
		reason := fmt.Sprintf("Agent %s may not start workflow %s (data.gateway.workflow.allow).", agentID, name)
		if d.FailClosed {
			reason = d.Reason
		}
		e.write(ctx, audit.Record{Kind: KindStart, AgentID: agentID, Summary: map[string]any{
			"workflow": name, "allowed": false, "decision_id": d.DecisionID, "policy_revision": d.Revision, "reason": reason}})
		return nil, &StartError{Reason: reason}
	}
	// The run's first step is charged to its caller now, so a caller over
	// its step_limit starts nothing; each later step is charged before its
	// call (advance).
	if err := e.chargeStep(ctx, agentID); err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			e.write(ctx, audit.Record{Kind: KindStart, AgentID: agentID, Summary: map[string]any{
				"workflow": name, "allowed": false, "decision_id": d.DecisionID, "policy_revision": d.Revision,
				"limit": "step_limit", "reason": le.Reason}})
		}
		return nil, err
	}
	now := e.now().UTC()
	id := "run-" + newID()
	r := &Run{ID: id, Workflow: name, Caller: agentID, Status: InProgress, Current: wf.Start, Input: input,
		Steps: []Step{}, Path: []string{}, Outputs: map[string]*Answer{},
		Context:   Context{WorkflowID: id, Status: InProgress, CurrentAgent: wf.Nodes[wf.Start].Agent, Entities: map[string]any{}, History: []HistoryEntry{}, Artifacts: []Artifact{}},
		CreatedAt: now, UpdatedAt: now}
	for _, n := range wf.NodeOrder {
		for _, ent := range wf.Nodes[n].Owns {
			r.Context.Entities[ent] = nil
		}
	}
	// The start is on record before anything runs (closed mode: or not at all).
	if err := e.write(ctx, audit.Record{Kind: KindStart, AgentID: agentID, Summary: map[string]any{
		"run_id": id, "workflow": name, "allowed": true, "decision_id": d.DecisionID, "policy_revision": d.Revision, "start": wf.Start}}); err != nil {
		return nil, err
	}
	if err := e.store.Create(ctx, r); err != nil {
		return nil, fmt.Errorf("workflow run: %w", err)
	}
	e.launch(id)
	return r, nil
}

// Get returns a run of workflow name.
func (e *Engine) Get(ctx context.Context, name, id string) (*Run, error) {
	r, err := e.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.Workflow != name {
		return nil, ErrNotFound
	}
	return r, nil
}

// Wait returns the run once it ended or waits for a person, or when ctx
// ends (then the run as it is).
func (e *Engine) Wait(ctx context.Context, id string) (*Run, error) {
	// Changes made here wake the wait at once; a run another replica
	// advances is polled.
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	var changed <-chan struct{}
	defer func() { e.unwatch(id, changed) }()
	for {
		changed = e.watch(id)
		// The last read uses a context of its own: the wait may be over,
		// the answer is still owed.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		r, err := e.store.Get(rctx, id)
		cancel()
		if err != nil || r.Status.Final() || r.Status == WaitingForHuman {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, nil
		case <-changed:
		case <-t.C:
		}
	}
}

// watch returns a channel closed at the next change of run id here.
func (e *Engine) watch(id string) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch, ok := e.changed[id]
	if !ok {
		ch = make(chan struct{})
		e.changed[id] = ch
	}
	return ch
}

// unwatch forgets the channel of a wait that is over, unless a change
// already replaced it (a wait still on it then polls).
func (e *Engine) unwatch(id string, ch <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur, ok := e.changed[id]; ok && (<-chan struct{})(cur) == ch {
		delete(e.changed, id)
	}
}

// notify wakes the waits on run id.
func (e *Engine) notify(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ch, ok := e.changed[id]; ok {
		close(ch)
		delete(e.changed, id)
	}
}

// update is the store's Update, waking the waits on the run.
func (e *Engine) update(ctx context.Context, id string, fn func(*Run) error) (*Run, error) {
	r, err := e.store.Update(ctx, id, fn)
	if err == nil {
		e.notify(id)
	}
	return r, err
}

// ErrEnded is a cancel of a run that has ended already.
var ErrEnded = errors.New("the run has ended")

// Cancel ends a live run as CANCELLED (by is who asked, for the record).
func (e *Engine) Cancel(ctx context.Context, id, by string) (*Run, error) {
	r, err := e.update(ctx, id, func(r *Run) error {
		if r.Status.Final() {
			return ErrEnded
		}
		e.end(r, Cancelled, "cancelled by "+by)
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if stop, ok := e.running[id]; ok {
		stop()
	}
	e.mu.Unlock()
	e.writeEnd(ctx, r)
	return r, nil
}

// launch starts advancing run id in this replica unless it already is.
func (e *Engine) launch(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, busy := e.running[id]; busy || e.base.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(e.base)
	e.running[id] = cancel
	e.wg.Go(func() {
		defer func() {
			e.mu.Lock()
			delete(e.running, id)
			e.mu.Unlock()
			cancel()
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = e.store.Release(rctx, id, e.owner)
			rcancel()
		}()
		e.drive(ctx, id)
	})
}

// drive advances the run step by step while it is in progress and this
// replica holds its lease (one step at a time per run, across replicas).
func (e *Engine) drive(ctx context.Context, id string) {
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := e.store.Lease(lctx, id, e.owner, e.leaseTTL)
		cancel()
		if err != nil {
			e.log.Warn("workflow run: lease not taken", "run_id", id, "error", err.Error())
			return
		}
		if !ok {
			return // another replica advances it
		}
		if !e.advance(ctx, id) {
			return
		}
	}
}

// keepLease renews the lease of run id while a step's call runs, so a long
// call is not taken over; it stops when the returned func is called.
func (e *Engine) keepLease(ctx context.Context, id string) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(e.leaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
				_, _ = e.store.Lease(lctx, id, e.owner, e.leaseTTL)
				lcancel()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// errStopped is a run that stopped being in progress while a step ran
// (cancelled): the step's result is dropped.
var errStopped = errors.New("run no longer in progress")

// advance runs the current node once and moves the run on; it reports
// whether the run is still in progress.
func (e *Engine) advance(ctx context.Context, id string) bool {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	run, err := e.store.Get(sctx, id)
	cancel()
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			e.log.Warn("workflow run: cannot read", "run_id", id, "error", err.Error())
		}
		return false
	}
	if run.Status != InProgress {
		return false
	}
	wf := e.defs.Load().Get(run.Workflow)
	var node *definition.Node
	if wf != nil {
		node = wf.Nodes[run.Current]
	}
	// st stays empty when the run ends without a step.
	var st Step
	var mv move
	switch {
	case wf == nil || node == nil:
		mv = failed(fmt.Sprintf("workflow %s (node %s) is no longer defined", run.Workflow, run.Current))
	case len(run.Steps) >= wf.MaxSteps:
		mv = failed(fmt.Sprintf("the run reached max_steps (%d) before node %s", wf.MaxSteps, run.Current))
	case len(run.Steps) > 0 && !e.chargeLater(ctx, run, &mv):
		// Over the caller's step_limit, mv fails the run.
		if mv.status == "" {
			return false // the limiter could not answer: the run waits, another pass continues it
		}
	default:
		st = Step{Node: run.Current, Agent: node.Agent, StartedAt: e.now().UTC()}
		st, mv = e.call(ctx, wf, node, run, st)
	}
	if ctx.Err() != nil {
		return false // cancelled, or this replica stops: not this step's result
	}
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer ucancel()
	if mv.status == WaitingForHuman {
		mv = e.openReview(uctx, run, st, mv)
	}
	updated, err := e.update(uctx, id, func(r *Run) error {
		// Only on the state the step started from: a run cancelled, or
		// advanced by another replica that took the lease meanwhile, keeps
		// what happened there.
		if r.Status != InProgress || len(r.Steps) != len(run.Steps) || r.Current != run.Current {
			return errStopped
		}
		e.apply(r, wf, st, mv)
		return nil
	})
	if err != nil {
		if !errors.Is(err, errStopped) {
			e.log.Error("workflow run: step not stored", "run_id", id, "node", st.Node, "error", err.Error())
		}
		return false
	}
	if st.Node != "" {
		e.writeStep(uctx, updated, st)
	}
	switch updated.Status {
	case WaitingForHuman:
		e.write(uctx, audit.Record{Kind: KindSuspend, AgentID: st.Agent, Summary: map[string]any{
			"run_id": id, "workflow": updated.Workflow, "node": st.Node, "escalation_id": updated.EscalationID, "reason": mv.reason}})
		return false
	case InProgress:
		return true
	}
	e.writeEnd(uctx, updated)
	return false
}

// StepsKey prefixes the limiter key of a caller's workflow steps.
const StepsKey = "wfsteps:"

// LimitError is a step its run's caller may not take now: its step_limit
// is spent.
type LimitError struct {
	Reason     string
	RetryAfter time.Duration
}

func (e *LimitError) Error() string { return e.Reason }

// chargeStep counts one step against caller's step_limit. The node agents'
// own limits count the same call too: a run spends its caller's allowance
// as well as theirs, so one start cannot buy unbounded calls.
func (e *Engine) chargeStep(ctx context.Context, caller string) error {
	n, period := e.defs.Load().CallerSteps()
	rule := config.Rate{N: n, Period: period}
	res, err := e.steps.Allow(ctx, StepsKey+caller, limit.Rule{N: n, Period: period}, 1)
	if err != nil {
		return fmt.Errorf("workflow step limit: %w", err)
	}
	if !res.Allowed {
		return &LimitError{RetryAfter: res.RetryAfter, Reason: fmt.Sprintf(
			"Agent %s reached its workflow step_limit (%s steps of the runs it starts). Retry after %s.",
			caller, rule, (res.RetryAfter + time.Second - 1).Truncate(time.Second))}
	}
	return nil
}

// chargeLater charges a step after the first (the start paid that one) and
// reports whether the step may run. When it may not, mv is the run's
// failure, or stays empty when the limiter could not answer: then no call
// is made and the run is left as it is, for a later pass.
func (e *Engine) chargeLater(ctx context.Context, run *Run, mv *move) bool {
	err := e.chargeStep(ctx, run.Caller)
	var le *LimitError
	switch {
	case err == nil:
		return true
	case errors.As(err, &le):
		*mv = failed(fmt.Sprintf("the run stopped before node %s: %s", run.Current, le.Reason))
	case ctx.Err() == nil:
		e.log.Warn("workflow run: step not charged, the run waits", "run_id", run.ID, "error", err.Error())
	}
	return false
}

// move is where a step sends the run.
type move struct {
	// to is the next node (when status is InProgress).
	to     string
	status Status
	// note goes with the next node's input.
	note string
	// negotiation counts a retry_with_instruction round trip.
	negotiation bool
	reason      string
	// escalationID and reviewURL are the review a suspension opened.
	escalationID, reviewURL string
	// artifacts are the blobs the step's answer was relieved of.
	artifacts []Artifact
	// entities are the answer's entity writes, checked.
	entities map[string]any
}

func failed(reason string) move { return move{status: Failed, reason: reason} }

// call renders the node's input, calls its agent and decides the move.
func (e *Engine) call(ctx context.Context, wf *definition.Workflow, node *definition.Node, run *Run, st Step) (Step, move) {
	st.Attempt = 1
	for _, s := range run.Steps {
		if s.Node == node.Name {
			st.Attempt++
		}
	}
	stepFailed := func(reason string) (Step, move) {
		st.Status, st.Error, st.EndedAt = "error", reason, e.now().UTC()
		return st, failed(fmt.Sprintf("step %d (%s): %s", len(run.Steps)+1, node.Name, reason))
	}
	input, err := node.Input.Render(run.root(), func(ref any) (string, error) { return blobText(ctx, e.blobs, ref) })
	if err != nil {
		return stepFailed(err.Error())
	}
	if run.Note != "" {
		input += "\n\n" + run.Note
	}
	st.Input = input
	timeout := node.Timeout
	if timeout <= 0 {
		timeout = e.stepTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	release := e.keepLease(ctx, run.ID)
	reply, err := e.caller.Call(cctx, Call{Agent: node.Agent, Model: node.Model, Input: input, RunID: run.ID, Node: node.Name})
	release()
	cancel()
	st.RequestID = reply.RequestID
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return stepFailed(fmt.Sprintf("the agent did not answer within %s", timeout))
		}
		return stepFailed(err.Error())
	}
	a := reply.Answer
	// Large binary values leave the answer before anything stores or
	// routes on it; the run's agents may fetch them.
	refs, err := externalize(ctx, e.blobs, a.Data, e.maxInline, runAgents(wf, run))
	if err != nil {
		return stepFailed(err.Error())
	}
	if err := e.checkURLs(ctx, wf, node, a); err != nil {
		return stepFailed(err.Error())
	}
	st.Answer, st.Status, st.EndedAt = &a, a.Status, e.now().UTC()
	// Entity writes are checked before anything routes on them, and the
	// conditions see the run as the step leaves it.
	writes, err := entityWrites(node, a)
	if err != nil {
		return stepFailed(err.Error())
	}
	next, err := run.clone()
	if err != nil {
		return stepFailed(err.Error())
	}
	applyAnswer(next, node.Name, a, writes)
	mv, err := e.route(ctx, wf, node, next, a)
	if err != nil {
		return stepFailed(err.Error())
	}
	mv.entities = writes
	for _, ref := range refs {
		mv.artifacts = append(mv.artifacts, Artifact{Type: "blob", URL: ref["$ref"].(string), Node: node.Name,
			MediaType: ref["media_type"].(string), Size: ref["size"].(int)})
	}
	return st, mv
}

// checkURLs lets the signed URLs of an answer (in any string a later node
// may be given, urls.go) pass only where the policy allows their host: a
// signed URL is a capability to read a document, handed to every later
// agent of the run. One that is not https, scheme-relative ones included,
// is refused before the policy is asked.
func (e *Engine) checkURLs(ctx context.Context, wf *definition.Workflow, node *definition.Node, a Answer) error {
	urls := signedURLs(a)
	if len(urls) > maxSignedURLs {
		return fmt.Errorf("the answer carries %d signed URLs, more than %d: refused", len(urls), maxSignedURLs)
	}
	for _, u := range urls {
		if u.Scheme != "https" {
			return fmt.Errorf("a signed URL to %s is not https: refused", u.Host)
		}
		pctx, cancel := context.WithTimeout(ctx, e.policyTimeout)
		d, err := e.policy.SignedURL(pctx, map[string]any{
			"agent":    map[string]any{"id": node.Agent},
			"workflow": map[string]any{"name": wf.Name, "callers": anySlice(wf.Callers)},
			"node":     node.Name,
			"url":      map[string]any{"raw": u.String(), "host": u.Hostname(), "path": u.Path},
		})
		cancel()
		if err != nil {
			return fmt.Errorf("signed URL policy: %w", err)
		}
		if !d.Allow {
			reason := fmt.Sprintf("a signed URL to %s is not allowed (data.gateway.workflow.signed_url_allowed)", u.Hostname())
			if d.FailClosed {
				reason = d.Reason
			}
			return errors.New(reason)
		}
	}
	return nil
}

// runAgents may read a run's blobs: its caller and its nodes' agents.
func runAgents(wf *definition.Workflow, r *Run) []string {
	agents := []string{r.Caller}
	for _, n := range wf.NodeOrder {
		agents = append(agents, wf.Nodes[n].Agent)
	}
	return union(nil, agents)
}

// entityWrites are the Global Context entities an answer writes (its
// data.entities): a node writes only the entities it owns.
func entityWrites(node *definition.Node, a Answer) (map[string]any, error) {
	raw, ok := a.Data["entities"]
	if !ok {
		return nil, nil
	}
	ents, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("data.entities must be an object of entity name to value")
	}
	for _, name := range slices.Sorted(maps.Keys(ents)) {
		if !slices.Contains(node.Owns, name) {
			return nil, fmt.Errorf("node %s wrote entity %q, which it does not own (owns: %s)", node.Name, name, strings.Join(node.Owns, ", "))
		}
	}
	return ents, nil
}

// applyAnswer records node's answer a and its checked entity writes on r.
func applyAnswer(r *Run, node string, a Answer, writes map[string]any) {
	if r.Outputs == nil {
		r.Outputs = map[string]*Answer{}
	}
	r.Outputs[node] = &a
	if len(writes) > 0 && r.Context.Entities == nil {
		r.Context.Entities = map[string]any{}
	}
	maps.Copy(r.Context.Entities, writes)
}

// route decides the move after node answered a: negotiation, a pause for a
// person, or the first edge whose condition holds.
func (e *Engine) route(ctx context.Context, wf *definition.Workflow, node *definition.Node, r *Run, a Answer) (move, error) {
	switch a.Status {
	case sacp.StatusClarificationNeeded, sacp.StatusWaitingForHuman:
		return move{status: WaitingForHuman, reason: a.Message}, nil
	case sacp.StatusRetryWithInstruction:
		prev := ""
		if n := len(r.Path); n > 0 {
			prev = r.Path[n-1]
		}
		instruction, _ := a.Data["instruction"].(string)
		switch {
		case prev == "":
			return failed(fmt.Sprintf("node %s asked to retry the previous node, and it is the first", node.Name)), nil
		case r.Negotiations < wf.MaxNegotiationRounds:
			return move{status: InProgress, to: prev, negotiation: true,
				note: fmt.Sprintf("The next agent (%s) could not use your answer and asks you to do this step again: %s", node.Name, instruction)}, nil
		}
		mv, matched, err := e.edges(ctx, wf, node, r, a)
		if err != nil || matched {
			return mv, err
		}
		return failed(fmt.Sprintf("node %s still asks for a retry after %d negotiation rounds (max_negotiation_rounds)", node.Name, wf.MaxNegotiationRounds)), nil
	}
	mv, matched, err := e.edges(ctx, wf, node, r, a)
	if err != nil || matched {
		return mv, err
	}
	if len(wf.EdgesFrom(node.Name)) == 0 {
		return move{status: Completed}, nil
	}
	return failed(fmt.Sprintf("no edge from %s matches its answer (status %q)", node.Name, a.Status)), nil
}

// edges follows the first edge out of node whose condition holds.
func (e *Engine) edges(ctx context.Context, wf *definition.Workflow, node *definition.Node, r *Run, a Answer) (move, bool, error) {
	resp, in, cx := jsonValue(a), jsonValue(r.Input), jsonValue(r.Context)
	for _, ed := range wf.EdgesFrom(node.Name) {
		if ed.When != nil {
			cctx, cancel := context.WithTimeout(ctx, e.policyTimeout)
			ok, err := ed.When.Eval(cctx, resp, in, cx)
			cancel()
			if err != nil {
				return move{}, false, fmt.Errorf("edge %s -> %s: condition %q: %w", ed.From, ed.To, ed.When.String(), err)
			}
			if !ok {
				continue
			}
		}
		switch ed.To {
		case definition.End:
			return move{status: Completed}, true, nil
		case definition.Failed:
			return move{status: Failed, reason: fmt.Sprintf("edge %s -> failed", ed.From)}, true, nil
		}
		return move{status: InProgress, to: ed.To}, true, nil
	}
	return move{}, false, nil
}

// apply records step st and move mv on r.
func (e *Engine) apply(r *Run, wf *definition.Workflow, st Step, mv move) {
	now := e.now().UTC()
	ran := st.Node != ""
	if st.EndedAt.IsZero() {
		st.EndedAt = now
	}
	if ran {
		r.Path = append(r.Path, st.Node)
	}
	if st.Answer != nil && st.Error == "" {
		applyAnswer(r, st.Node, *st.Answer, mv.entities)
		r.Context.History = append(r.Context.History, HistoryEntry{Agent: st.Agent, Node: st.Node, Action: st.Answer.Status, Timestamp: st.EndedAt})
		r.Context.Artifacts = append(r.Context.Artifacts, mv.artifacts...)
	}
	r.Note = ""
	switch mv.status {
	case InProgress:
		st.Next = mv.to
		r.Current = mv.to
		if mv.negotiation {
			r.Negotiations++
		}
		r.Note = mv.note
		if wf != nil && wf.Nodes[mv.to] != nil {
			r.Context.CurrentAgent = wf.Nodes[mv.to].Agent
		}
	case WaitingForHuman:
		r.setStatus(WaitingForHuman)
		r.EscalationID, r.ReviewURL = mv.escalationID, mv.reviewURL
	case Completed:
		st.Next = definition.End
		e.end(r, Completed, "")
	default:
		st.Next = definition.Failed
		e.end(r, Failed, mv.reason)
	}
	if ran {
		r.Steps = append(r.Steps, st)
	}
	r.UpdatedAt = now
}

// end makes r final.
func (e *Engine) end(r *Run, s Status, reason string) {
	now := e.now().UTC()
	r.setStatus(s)
	r.Error, r.EndedAt, r.UpdatedAt = reason, now, now
	r.EscalationID, r.ReviewURL = "", ""
}

func (e *Engine) writeStep(ctx context.Context, r *Run, st Step) {
	sum := map[string]any{"run_id": r.ID, "workflow": r.Workflow, "node": st.Node, "attempt": st.Attempt,
		"status": st.Status, "request_id": st.RequestID, "run_status": string(r.Status)}
	if last := r.Steps[len(r.Steps)-1]; last.Next != "" {
		sum["next"] = last.Next
	}
	if st.Error != "" {
		sum["error"] = st.Error
	}
	e.write(ctx, audit.Record{Kind: KindStep, AgentID: st.Agent, Summary: sum})
}

func (e *Engine) writeEnd(ctx context.Context, r *Run) {
	e.write(ctx, audit.Record{Kind: KindEnd, AgentID: r.Caller, Summary: map[string]any{
		"run_id": r.ID, "workflow": r.Workflow, "status": string(r.Status), "steps": len(r.Steps), "error": r.Error}})
}

// write records an entry; the error matters only where the caller waits
// for it (the start, in closed mode): steps that already happened are
// logged when their entry fails.
func (e *Engine) write(ctx context.Context, rec audit.Record) error {
	return e.audit.Write(context.WithoutCancel(ctx), rec)
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
