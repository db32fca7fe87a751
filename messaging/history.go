package messaging

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/sacpgw/gateway/apierror"
	"github.com/sacpgw/gateway/mailbox"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/scope"
)

// HistoryList is GET /v1/messages: one page of a thread.
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

// Page sizes of GET /v1/messages (limit parameter).
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

// thread reads the workflow_id or correlation_id query parameter (exactly
// one) and lists the thread.
func (s *Service) thread(r *http.Request) (kind, id string, entries []mailbox.Entry, err error) {
	q := r.URL.Query()
	wf, corr := q.Get("workflow_id"), q.Get("correlation_id")
	kind, id = mailbox.KeyWorkflow, wf
	switch {
	case (wf == "") == (corr == ""):
		return "", "", nil, apierror.BadRequest("workflow_id", "Give exactly one of workflow_id and correlation_id.")
	case corr != "":
		kind, id = mailbox.KeyCorrelation, corr
	}
	if len(id) > 128 {
		return "", "", nil, apierror.BadRequest(kind+"_id", "%s_id is longer than 128 bytes.", kind)
	}
	entries, err = s.history.List(r.Context(), kind, id, 0)
	if err != nil {
		return "", "", nil, errorf("history: %w", err)
	}
	return kind, id, entries, nil
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

// History serves GET /v1/messages?workflow_id=W (or correlation_id=C):
// the thread's messages, oldest first, that the authenticated agent sent
// or received. A thread with none of its messages is 404, exactly like a
// thread that does not exist, so agents cannot probe other workflows.
func (s *Service) History(w http.ResponseWriter, r *http.Request) {
	ex := scope.Get(r.Context())
	p, err := pageOf(r)
	if err != nil {
		proxy.Fail(w, r, err)
		return
	}
	kind, id, entries, err := s.thread(r)
	if err != nil {
		proxy.Fail(w, r, err)
		return
	}
	me := ex.Agent.ID
	visible := make([]mailbox.Entry, 0, len(entries))
	for _, e := range entries {
		if e.Sender == me || slices.Contains(e.Recipients, me) {
			visible = append(visible, e)
		}
	}
	if len(visible) == 0 {
		proxy.Fail(w, r, &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "not_found", Param: kind + "_id",
			Message: "No messages of this " + kind + " were sent to or by agent " + me + "."})
		return
	}
	proxy.WriteJSON(w, r, http.StatusOK, list(kind, id, visible, p))
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
// Each read is audited (who, which thread, how many messages).
func (s *Service) AdminHistory(people People) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, err := people.Person(r)
		if err != nil {
			proxy.Fail(w, r, err)
			return
		}
		p, err := pageOf(r)
		if err != nil {
			proxy.Fail(w, r, err)
			return
		}
		kind, id, entries, err := s.thread(r)
		if err != nil {
			proxy.Fail(w, r, err)
			return
		}
		ex := scope.Lookup(r.Context())
		rec := s.record(ex, KindMessageRead, "", map[string]any{"reader": who, "thread_kind": kind, "thread_id": id, "messages": len(entries)})
		if err := s.audit.Write(r.Context(), rec); err != nil {
			proxy.Fail(w, r, err)
			return
		}
		if len(entries) == 0 {
			proxy.Fail(w, r, &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "not_found", Param: kind + "_id",
				Message: "No messages in this " + kind + "."})
			return
		}
		proxy.WriteJSON(w, r, http.StatusOK, list(kind, id, entries, p))
	})
}
