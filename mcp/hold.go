package mcp

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/policy"
)

// A held call: when the server or tool has a hold, an escalated
// tools/call is not refused at once. The gateway opens the review, keeps
// the agent's request open (as an event stream when the client takes one,
// with a progress notification at once and every holdProgress when the
// call carries a progressToken), and waits for the decision, at most the
// hold. Approved, it takes the approval the decision granted and makes
// exactly the call the person saw; rejected, expired or not decided in
// time, the call fails with an error naming which. Nothing runs that was
// not decided: the call is made only with a grant taken from the store.

// holdProgress spaces the progress notifications of a held call; between
// them the gateway also looks for the approval in the grants (a decision
// heard by another replica reaches this one only there).
const holdProgress = 5 * time.Second

// holds are the calls held open on this replica, by escalation id: a
// decision heard here wakes its call at once.
type holds struct {
	mu      sync.Mutex
	waiting map[string]chan escalation.Decided
}

func (h *holds) wait(id string) chan escalation.Decided {
	ch := make(chan escalation.Decided, 1)
	h.mu.Lock()
	if h.waiting == nil {
		h.waiting = map[string]chan escalation.Decided{}
	}
	h.waiting[id] = ch
	h.mu.Unlock()
	return ch
}

func (h *holds) done(id string) {
	h.mu.Lock()
	delete(h.waiting, id)
	h.mu.Unlock()
}

// tell wakes the call held for dec, if it is held here.
func (h *holds) tell(dec escalation.Decided) {
	h.mu.Lock()
	ch := h.waiting[dec.ID]
	h.mu.Unlock()
	if ch != nil {
		select {
		case ch <- dec:
		default:
		}
	}
}

// holdFor is how long a call of tool is held for a person (0: not held).
func (s *server) holdFor(tool string) time.Duration {
	if h, ok := s.toolHold[tool]; ok {
		return h
	}
	return s.hold
}

// hold waits for a person's decision on the call; it returns the
// escalation whose approval it took, or false once it answered the agent
// (rejected, expired, not decided within wait, the agent gone).
func (t *turn) hold(ctx context.Context, m *message, a *answer, rec *record, label string, info toolInfo, out outCall,
	dec policy.MCPDecision, reason string, wait time.Duration, meta jsontext.Value) (string, bool) {
	// The person is shown when the agent stops waiting: the same instant
	// the wait below ends.
	deadline := time.Now().Add(wait)
	opened, ok := t.openReview(ctx, m, a, rec, label, info, out, dec, reason, deadline)
	if !ok {
		return "", false
	}
	rec.set("held", wait.String())
	decided := t.d.held.wait(opened.ID)
	defer t.d.held.done(opened.ID)
	key := grantKey(t.agent.ID, t.srv.name, info.Name, out.argsSHA256, out.metaSHA256)
	a.stream()
	token := progressToken(meta)
	waiting := "Waiting for a person to approve this call (" + reason + ")"
	if opened.ReviewURL != "" {
		waiting += ": " + opened.ReviewURL
	}
	tick := time.NewTicker(holdProgress)
	defer tick.Stop()
	expiry := time.NewTimer(time.Until(deadline))
	defer expiry.Stop()
	for n := 0; ; n++ {
		t.progress(a, token, n, waiting)
		select {
		case d := <-decided:
			if d.Approved {
				return t.takeHeld(ctx, m, a, rec, label, key, opened)
			}
			// The expiry decides as a system reviewer ("system:expiry").
			state := "rejected"
			if d.Reviewer == "" || strings.HasPrefix(d.Reviewer, "system:") {
				state = "expired"
			}
			rec.set("decision", state)
			t.refuse(ctx, m, a, rec, label, "deny", codeDenied, "The call was not made: its review was "+state+".",
				map[string]any{"escalation_id": opened.ID, "decision": state})
			return "", false
		case <-tick.C:
			if id, ok, err := t.d.grants.Take(ctx, key); err == nil && ok {
				return id, true
			}
		case <-expiry.C:
			if id, ok, err := t.d.grants.Take(ctx, key); err == nil && ok {
				return id, true
			}
			rec.set("decision", "undecided")
			t.refuse(ctx, m, a, rec, label, "escalate", codeEscalated,
				"No person decided within "+wait.String()+" (the hold expired): the call was not made. Once approved, send the same call again.",
				map[string]any{"escalation_id": opened.ID, "human_review_url": opened.ReviewURL, "decision": "undecided"})
			return "", false
		case <-ctx.Done():
			rec.set("decision", "abandoned")
			t.refuse(context.WithoutCancel(ctx), m, a, rec, label, "escalate", codeEscalated, "The agent left before a person decided.", nil)
			return "", false
		}
	}
}

// heldReview is what the review of a call held until until tells the
// person about the wait (nil: the call is not held).
func (t *turn) heldReview(ctx context.Context, until time.Time) *heldReview {
	if until.IsZero() {
		return nil
	}
	h := &heldReview{Until: until.UTC().Format(time.RFC3339)}
	if b, ok := door.BehalfOf(ctx); ok {
		h.Behalf = b.Name
	}
	return h
}

// takeHeld takes the approval a person's decision just granted.
func (t *turn) takeHeld(ctx context.Context, m *message, a *answer, rec *record, label, key string, opened escalation.Opened) (string, bool) {
	id, ok, err := t.d.grants.Take(ctx, key)
	switch {
	case err != nil:
		t.d.log.Error("mcp: grants", "error", err.Error())
		t.refuse(ctx, m, a, rec, label, "error", codeUnavailable, "The gateway's approvals are unavailable; the call was not made.", nil)
		return "", false
	case !ok:
		// An identical call took it first: one approval, one call.
		rec.set("decision", "taken")
		t.refuse(ctx, m, a, rec, label, "escalate", codeEscalated, "The approval was used by an identical call: this one was not made.",
			map[string]any{"escalation_id": opened.ID, "human_review_url": opened.ReviewURL})
		return "", false
	}
	return id, true
}

// progress tells a streaming agent the call still waits: a progress
// notification when the call has a progressToken, else a comment that
// keeps the stream open.
func (t *turn) progress(a *answer, token jsontext.Value, n int, msg string) {
	if !a.sse {
		return
	}
	if token == nil {
		if _, err := a.w.Write([]byte(": waiting for a person\n\n")); err == nil {
			_ = http.NewResponseController(a.w).Flush()
		}
		return
	}
	params, err := json.Marshal(map[string]any{"progressToken": token, "progress": n, "message": msg}, json.Deterministic(true))
	if err != nil {
		return
	}
	a.aside(request(nil, "notifications/progress", params))
}

// progressToken is the call's _meta.progressToken (a string or an
// integer), or nil.
func progressToken(meta jsontext.Value) jsontext.Value {
	if meta == nil {
		return nil
	}
	var m struct {
		Token jsontext.Value `json:"progressToken"`
	}
	if json.Unmarshal(meta, &m) != nil {
		return nil
	}
	switch m.Token.Kind() {
	case '"':
		return m.Token
	case '0':
		if _, err := strconv.ParseInt(string(m.Token), 10, 64); err == nil {
			return m.Token
		}
	}
	return nil
}
