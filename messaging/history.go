package messaging

import (
	"net/http"
	"slices"

	"github.com/sacpgw/gateway/apierror"
	"github.com/sacpgw/gateway/mailbox"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/scope"
)

// HistoryList is GET /v1/messages.
type HistoryList struct {
	Object        string          `json:"object"`
	WorkflowID    string          `json:"workflow_id,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Data          []mailbox.Entry `json:"data"`
}

// History serves GET /v1/messages?workflow_id=W (or correlation_id=C):
// the thread's messages, oldest first, that the authenticated agent sent
// or received. A thread with none of its messages is 404, exactly like a
// thread that does not exist, so agents cannot probe other workflows.
func (s *Service) History(w http.ResponseWriter, r *http.Request) {
	ex := scope.Get(r.Context())
	q := r.URL.Query()
	wf, corr := q.Get("workflow_id"), q.Get("correlation_id")
	kind, id := mailbox.KeyWorkflow, wf
	switch {
	case (wf == "") == (corr == ""):
		proxy.Fail(w, r, apierror.BadRequest("workflow_id", "Give exactly one of workflow_id and correlation_id."))
		return
	case corr != "":
		kind, id = mailbox.KeyCorrelation, corr
	}
	if len(id) > 128 {
		proxy.Fail(w, r, apierror.BadRequest(kind+"_id", "%s_id is longer than 128 bytes.", kind))
		return
	}
	entries, err := s.history.List(r.Context(), kind, id, 0)
	if err != nil {
		proxy.Fail(w, r, errorf("history: %w", err))
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
	out := HistoryList{Object: "list", Data: visible}
	if kind == mailbox.KeyWorkflow {
		out.WorkflowID = id
	} else {
		out.CorrelationID = id
	}
	writeJSON(w, http.StatusOK, out)
}
