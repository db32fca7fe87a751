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
	"sync"
	"sync/atomic"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
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
	// Sender is set for a registry-driven node: the run's caller, who
	// messages the chosen agent, and Action is what it sends.
	Sender, Action string
	// Caller is the run's caller: an A2A agent's step is its message to
	// the agent, governed as the caller's own.
	Caller string
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
	// Picker asks the registry for a registry-driven node's agent; nil:
	// such a node fails its step.
	Picker Picker
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
	picker        Picker
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
		picker: d.Picker, now: time.Now, leaseTTL: 15 * time.Second,
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
		e.write(ctx, audit.Record{Kind: KindStart, AgentID: agentID, Object: audit.Members(
			"workflow", name, "allowed", false, "decision_id", d.DecisionID, "policy_revision", d.Revision, "reason", reason)})
		return nil, &StartError{Reason: reason}
	}
	// The run's first step is charged to its caller now, so a caller over
	// its step_limit starts nothing; each later step is charged before its
	// call (advance).
	if err := e.chargeStep(ctx, agentID); err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			e.write(ctx, audit.Record{Kind: KindStart, AgentID: agentID, Object: audit.Members(
				"workflow", name, "allowed", false, "decision_id", d.DecisionID, "policy_revision", d.Revision,
				"limit", "step_limit", "reason", le.Reason)})
		}
		return nil, err
	}
	now := e.now().UTC()
	id := "run-" + newID()
	r := &Run{View: View{ID: id, Workflow: name, Status: InProgress, Current: wf.Start, Steps: []Step{}, Path: []string{},
		Context:   Context{WorkflowID: id, Status: InProgress, CurrentAgent: wf.Nodes[wf.Start].Agent, Entities: map[string]any{}, History: []HistoryEntry{}, Artifacts: []Artifact{}},
		CreatedAt: now, UpdatedAt: now},
		Caller: agentID, Input: input, Outputs: map[string]*Answer{}}
	for _, n := range wf.NodeOrder {
		for _, ent := range wf.Nodes[n].Owns {
			r.Context.Entities[ent] = nil
		}
	}
	// The start is on record before anything runs (closed mode: or not at all).
	if err := e.write(ctx, audit.Record{Kind: KindStart, AgentID: agentID, Object: audit.Members(
		"run_id", id, "workflow", name, "allowed", true, "decision_id", d.DecisionID, "policy_revision", d.Revision, "start", wf.Start)}); err != nil {
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
