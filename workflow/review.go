package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/escalation"
)

// reviewContent is what the reviewer of a suspended run sees (the
// escalation's content): the question, the run's Global Context and path.
type reviewContent struct {
	RunID    string   `json:"run_id"`
	Workflow string   `json:"workflow"`
	Node     string   `json:"node"`
	Agent    string   `json:"agent"`
	Question string   `json:"question"`
	Answer   *Answer  `json:"answer"`
	Path     []string `json:"path"`
	Context  Context  `json:"context"`
	// Graph is the workflow as Mermaid text, with the path taken.
	Graph string `json:"graph"`
}

// openReview opens the escalation of a run the step st suspends; a run no
// reviewer can answer fails instead.
func (e *Engine) openReview(ctx context.Context, run *Run, st Step, mv move) move {
	if e.escalator == nil {
		return failed(fmt.Sprintf("node %s asked for a person (%s), and this gateway has no review service", st.Node, st.Status))
	}
	c := reviewContent{RunID: run.ID, Workflow: run.Workflow, Node: st.Node, Agent: st.Agent, Question: mv.reason,
		Answer: st.Answer, Path: append(append([]string{}, run.Path...), st.Node), Context: run.Context}
	// The run is suspended by this review: its Global Context says so as
	// GET /workflows/{name}/runs/{id} will (the run itself is updated
	// after the escalation is open).
	c.Context.Status = WaitingForHuman
	var svg []byte
	if wf := e.defs.Load().Get(run.Workflow); wf != nil {
		c.Graph = wf.Mermaid()
		svg = wf.SVG(c.Path, st.Node)
	}
	content, err := json.Marshal(c)
	if err != nil {
		return failed("the review could not be prepared: " + err.Error())
	}
	o, err := e.escalator.Open(ctx, escalation.Request{
		Type: escalation.TypeWorkflow, AgentID: st.Agent, SessionID: run.ID,
		Action:  fmt.Sprintf("workflow %s: node %s asks for a person", run.Workflow, st.Node),
		Content: string(content), Reason: fmt.Sprintf("Agent %s answered %s: %s", st.Agent, st.Status, mv.reason),
		Graph: string(svg),
	})
	if err != nil {
		e.log.Error("workflow run: escalation not opened", "run_id", run.ID, "error", err.Error())
		return failed(fmt.Sprintf("node %s asked for a person, and the review could not be opened", st.Node))
	}
	mv.escalationID, mv.reviewURL = o.ID, o.ReviewURL
	return mv
}

// Resolve continues a suspended run after its review (escalation.Resolver):
// approved, the person's comment becomes the node's next input and the run
// resumes at the same node; rejected or expired, the run fails.
func (e *Engine) Resolve(ctx context.Context, d escalation.Decided) error {
	var c reviewContent
	if err := json.Unmarshal([]byte(d.Content), &c); err != nil || c.RunID == "" {
		return errors.New("workflow review: the escalation names no run")
	}
	resumed := false
	r, err := e.update(ctx, c.RunID, func(r *Run) error {
		resumed = false // fn may run again when the store retries
		if r.Status != WaitingForHuman || r.EscalationID != d.ID {
			return ErrEnded
		}
		switch {
		case d.Approved:
			answer := d.Comment
			if answer == "" {
				answer = "(no comment: continue as you see fit)"
			}
			r.setStatus(InProgress)
			r.Note = fmt.Sprintf("A person (%s) answered your question: %s", reviewer(d), answer)
			r.EscalationID, r.ReviewURL = "", ""
			r.UpdatedAt = e.now().UTC()
			resumed = true
		case expired(d):
			e.end(r, Failed, "the review expired without an answer")
		default:
			e.end(r, Failed, fmt.Sprintf("the reviewer %s rejected the run: %s", d.Reviewer, d.Comment))
		}
		return nil
	})
	if errors.Is(err, ErrEnded) || errors.Is(err, ErrNotFound) {
		return nil // cancelled meanwhile: nothing to resume
	}
	if err != nil {
		return fmt.Errorf("workflow review of run %s: %w", c.RunID, err)
	}
	if !resumed {
		e.writeEnd(ctx, r)
		return nil
	}
	e.write(ctx, audit.Record{Kind: KindResume, AgentID: c.Agent, Object: audit.Members(
		"run_id", r.ID, "workflow", r.Workflow, "node", r.Current, "escalation_id", d.ID, "reviewer", d.Reviewer)})
	e.launch(r.ID)
	return nil
}

// expired reports a decision the expiry made, not a person.
func expired(d escalation.Decided) bool {
	return d.Reviewer == "" || strings.HasPrefix(d.Reviewer, "system:")
}

func reviewer(d escalation.Decided) string {
	if d.Reviewer == "" {
		return "reviewer"
	}
	return d.Reviewer
}
