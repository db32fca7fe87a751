package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sacpgw/gateway/internal/globalctx"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/sacp"
	"github.com/sacpgw/gateway/workflow/definition"
)

// One step of a run: the node's agent called (within the caller's
// step_limit), its answer checked and applied, the next node chosen by the
// edges, and the step and the run's end written to the audit trail.

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
		e.write(uctx, audit.Record{Kind: KindSuspend, AgentID: st.Agent, Object: audit.Members(
			"run_id", id, "workflow", updated.Workflow, "node", st.Node, "escalation_id", updated.EscalationID, "reason", mv.reason)})
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
	release := e.keepLease(ctx, run.ID)
	call := Call{Agent: node.Agent, Model: node.Model, Input: input, RunID: run.ID, Node: node.Name, Caller: run.Caller}
	if node.Pick != nil {
		pk, err := e.pick(ctx, wf, node, run, timeout)
		e.writePick(ctx, run, node.Name, pk, err)
		st.Pick, st.Agent = pk, pk.Chosen
		if err != nil {
			release()
			return stepFailed(err.Error())
		}
		call.Agent, call.Sender, call.Action = pk.Chosen, run.Caller, pk.Query.Action
		if call.Model == "" {
			call.Model = pk.model
		}
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	reply, err := e.caller.Call(cctx, call)
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
	refs, err := externalize(ctx, e.blobs, a.Data, e.maxInline, union(runAgents(wf, run), []string{st.Agent}))
	if err != nil {
		return stepFailed(err.Error())
	}
	if err := e.checkURLs(ctx, wf, node, st.Agent, a); err != nil {
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
func (e *Engine) checkURLs(ctx context.Context, wf *definition.Workflow, node *definition.Node, agent string, a Answer) error {
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
			"agent":    map[string]any{"id": agent},
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

// runAgents may read a run's blobs: its caller, its nodes' fixed agents
// and the agents its registry-driven steps chose.
func runAgents(wf *definition.Workflow, r *Run) []string {
	agents := []string{r.Caller}
	for _, n := range wf.NodeOrder {
		if a := wf.Nodes[n].Agent; a != "" {
			agents = append(agents, a)
		}
	}
	for _, s := range r.Steps {
		if s.Pick != nil && s.Agent != "" {
			agents = append(agents, s.Agent)
		}
	}
	return union(nil, agents)
}

// entityWrites are the Global Context entities an answer writes (its
// data.entities): a node writes only the entities it owns.
func entityWrites(node *definition.Node, a Answer) (map[string]any, error) {
	return globalctx.Writes("node "+node.Name, node.Owns, a.Data)
}

// applyAnswer records node's answer a and its checked entity writes on r.
func applyAnswer(r *Run, node string, a Answer, writes map[string]any) {
	if r.Outputs == nil {
		r.Outputs = map[string]*Answer{}
	}
	r.Outputs[node] = &a
	r.Context.Apply(writes)
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
	sum := audit.Members("run_id", r.ID, "workflow", r.Workflow, "node", st.Node, "attempt", st.Attempt,
		"status", st.Status, "request_id", st.RequestID, "run_status", string(r.Status))
	if last := r.Steps[len(r.Steps)-1]; last.Next != "" {
		sum.Str("next", last.Next)
	}
	if st.Error != "" {
		sum.Str("error", st.Error)
	}
	e.write(ctx, audit.Record{Kind: KindStep, AgentID: st.Agent, Object: sum})
}

func (e *Engine) writeEnd(ctx context.Context, r *Run) {
	e.write(ctx, audit.Record{Kind: KindEnd, AgentID: r.Caller, Object: audit.Members(
		"run_id", r.ID, "workflow", r.Workflow, "status", string(r.Status), "steps", len(r.Steps), "error", r.Error)})
}

// write records an entry; the error matters only where the caller waits
// for it (the start, in closed mode): steps that already happened are
// logged when their entry fails.
func (e *Engine) write(ctx context.Context, rec audit.Record) error {
	return e.audit.Write(context.WithoutCancel(ctx), rec)
}
