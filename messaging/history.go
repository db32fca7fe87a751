package messaging

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/mailbox"
)

// HistoryList is GET /relay/messages: one page of a thread.
type HistoryList struct {
	Object        string          `json:"object"`
	WorkflowID    string          `json:"workflow_id,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Data          []mailbox.Entry `json:"data"`
	// HasMore says a further page exists; NextCursor is the cursor
	// parameter that fetches it. The history is append-only, so a cursor
	// stays valid while the thread is kept.
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Page sizes of GET /relay/messages (limit parameter).
const (
	defaultPage = 100
	maxPage     = 1000
)

// page is the limit and cursor parameters.
type page struct{ limit, from int }

func pageOf(r *http.Request) (page, error) {
	p := page{limit: defaultPage}
	q := r.URL.Query()
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPage {
			return p, apierror.BadRequest("limit", "limit must be an integer from 1 to %d.", maxPage)
		}
		p.limit = n
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return p, apierror.BadRequest("cursor", "cursor must be a next_cursor this API returned.")
		}
		p.from = n
	}
	return p, nil
}

// threadQuery is a read of a thread: which one, which page, its entries.
type threadQuery struct {
	kind, id string
	page     page
	entries  []mailbox.Entry
}

// thread reads the query parameters (exactly one of workflow_id and
// correlation_id, and the page) and lists the thread.
func (s *Service) thread(r *http.Request) (threadQuery, error) {
	var tq threadQuery
	p, err := pageOf(r)
	if err != nil {
		return tq, err
	}
	q := r.URL.Query()
	wf, corr := q.Get("workflow_id"), q.Get("correlation_id")
	tq.kind, tq.id, tq.page = mailbox.KeyWorkflow, wf, p
	switch {
	case (wf == "") == (corr == ""):
		return tq, apierror.BadRequest("workflow_id", "Give exactly one of workflow_id and correlation_id.")
	case corr != "":
		tq.kind, tq.id = mailbox.KeyCorrelation, corr
	}
	if len(tq.id) > 128 {
		return tq, apierror.BadRequest(tq.kind+"_id", "%s_id is longer than 128 bytes.", tq.kind)
	}
	if tq.entries, err = s.history.List(r.Context(), tq.kind, tq.id, 0); err != nil {
		return tq, errorf("history: %w", err)
	}
	return tq, nil
}

// answer writes the page of entries, or 404 when there are none.
func (tq threadQuery) answer(w http.ResponseWriter, r *http.Request, entries []mailbox.Entry, none string) {
	if len(entries) == 0 {
		httpx.Fail(w, r, &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "not_found", Param: tq.kind + "_id",
			Message: "No messages of this " + tq.kind + none + "."})
		return
	}
	httpx.WriteJSON(w, r, http.StatusOK, list(tq.kind, tq.id, entries, tq.page))
}

// list is the page p of entries.
func list(kind, id string, entries []mailbox.Entry, p page) HistoryList {
	from := min(p.from, len(entries))
	to := min(from+p.limit, len(entries))
	out := HistoryList{Object: "list", Data: entries[from:to], HasMore: to < len(entries)}
	if out.HasMore {
		out.NextCursor = strconv.Itoa(to)
	}
	if kind == mailbox.KeyWorkflow {
		out.WorkflowID = id
	} else {
		out.CorrelationID = id
	}
	return out
}

// History serves GET /relay/messages?workflow_id=W (or correlation_id=C):
// the thread's messages, oldest first, that the authenticated agent sent
// or received. A thread with none of its messages is 404, exactly like a
// thread that does not exist, so agents cannot probe other workflows.
func (s *Service) History(w http.ResponseWriter, r *http.Request) {
	tq, me, ok := s.agentThread(w, r)
	if !ok {
		return
	}
	visible := make([]mailbox.Entry, 0, len(tq.entries))
	for _, e := range tq.entries {
		if e.Sender == me || slices.Contains(e.Recipients, me) {
			visible = append(visible, e)
		}
	}
	tq.answer(w, r, visible, " were sent to or by agent "+me)
}

// agentThread is the thread r asks the authenticated agent me about; a
// bad query is answered here (ok false).
func (s *Service) agentThread(w http.ResponseWriter, r *http.Request) (tq threadQuery, me string, ok bool) {
	me = scope.Get(r.Context()).Agent.ID
	tq, err := s.thread(r)
	if err != nil {
		httpx.Fail(w, r, err)
		return tq, me, false
	}
	return tq, me, true
}

// People authenticates the admin's and reviewers' tokens (approval.Service).
type People interface {
	Person(r *http.Request) (who string, err error)
}

// KindMessageRead: a person read a whole thread.
const KindMessageRead = "message.read"

// AdminHistory serves GET /admin/messages?workflow_id=W (or
// correlation_id=C) to the admin and reviewers: the whole thread, every
// participant's messages, as a reviewer needs it to decide an escalation.
//
// GET /admin/messages?dead_letters=1 lists the queue's dead letters
// instead, newest first (limit and cursor page them as for threads): the
// deliveries the gateway gave up on, because every attempt failed or
// because they were handed out max_deliveries times without being
// acknowledged. dead_letters takes "1" or "true" and no thread parameter.
//
// Each read is audited (message.read: who, which thread or the dead
// letters, how many).
func (s *Service) AdminHistory(people People) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, err := people.Person(r)
		if err != nil {
			httpx.Fail(w, r, err)
			return
		}
		if r.URL.Query().Has("dead_letters") {
			s.deadLetters(w, r, who)
			return
		}
		tq, err := s.thread(r)
		if err != nil {
			httpx.Fail(w, r, err)
			return
		}
		rec := s.record(scope.Lookup(r.Context()), KindMessageRead, "", audit.Members("reader", who, "thread_kind", tq.kind, "thread_id", tq.id, "messages", len(tq.entries)))
		if err := s.audit.Write(r.Context(), rec); err != nil {
			httpx.Fail(w, r, err)
			return
		}
		tq.answer(w, r, tq.entries, "")
	})
}

// DeadLetter is a delivery the gateway gave up on, as /admin/messages
// lists it.
type DeadLetter struct {
	DeliveryID string    `json:"delivery_id"`
	MessageID  string    `json:"message_id"`
	Sender     string    `json:"sender"`
	Recipient  string    `json:"recipient"`
	Priority   int       `json:"priority"`
	EnqueuedAt time.Time `json:"enqueued_at"`
	// Deliveries is how many times the queue handed it out.
	Deliveries int       `json:"deliveries"`
	Reason     string    `json:"reason"`
	At         time.Time `json:"at"`
	// PayloadSHA256 is the hash of the queued body; Envelope the body
	// itself when it is JSON (null otherwise: nothing of another shape is
	// passed on as if it were an envelope).
	PayloadSHA256 string          `json:"payload_sha256"`
	Envelope      json.RawMessage `json:"envelope"`
}

// DeadLetterList is the answer of GET /admin/messages?dead_letters=1.
type DeadLetterList struct {
	Object     string       `json:"object"`
	Data       []DeadLetter `json:"data"`
	HasMore    bool         `json:"has_more"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// deadLetters serves the dead letters to who.
func (s *Service) deadLetters(w http.ResponseWriter, r *http.Request, who string) {
	q := r.URL.Query()
	if v := q.Get("dead_letters"); v != "1" && v != "true" {
		httpx.Fail(w, r, apierror.BadRequest("dead_letters", "dead_letters must be 1 or true."))
		return
	}
	if q.Has("workflow_id") || q.Has("correlation_id") {
		httpx.Fail(w, r, apierror.BadRequest("dead_letters", "dead_letters lists the whole queue's: give no workflow_id or correlation_id with it."))
		return
	}
	p, err := pageOf(r)
	if err != nil {
		httpx.Fail(w, r, err)
		return
	}
	// One more than the page, to know whether there is a next one.
	all, err := s.queue.DeadLetters(r.Context(), p.from+p.limit+1)
	if err != nil {
		httpx.Fail(w, r, errorf("dead letters: %w", err))
		return
	}
	from := min(p.from, len(all))
	to := min(from+p.limit, len(all))
	out := DeadLetterList{Object: "list", Data: make([]DeadLetter, 0, to-from), HasMore: to < len(all)}
	if out.HasMore {
		out.NextCursor = strconv.Itoa(to)
	}
	for _, dl := range all[from:to] {
		d := dl.Delivery
		v := DeadLetter{DeliveryID: d.DeliveryID, MessageID: d.MessageID, Sender: d.Sender, Recipient: d.Recipient, Priority: d.Priority,
			EnqueuedAt: d.EnqueuedAt.UTC(), Deliveries: d.Deliveries, Reason: dl.Reason, At: dl.At.UTC(), PayloadSHA256: sha256Hex(d.Body)}
		if json.Valid(d.Body) {
			v.Envelope = json.RawMessage(d.Body)
		}
		out.Data = append(out.Data, v)
	}
	rec := s.record(scope.Lookup(r.Context()), KindMessageRead, "", audit.Members("reader", who, "dead_letters", len(out.Data)))
	if err := s.audit.Write(r.Context(), rec); err != nil {
		httpx.Fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, r, http.StatusOK, out)
}
