package messaging

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/mailbox"
)

// threadWith posts a REQUEST orch→planner (answered), and an event
// executor→orch, in workflow wf_v; then 3 events orch→planner in wf_long.
func threadWith(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, harnessOpts{})
	h.peers["planner"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"message_type":"response","sender_id":"planner","receiver_id":"orch","in_reply_to":"` + str(req["message_id"]) + `","action":"plan_complete"}`
	}))
	for _, s := range []struct{ agent, body string }{
		{"orch", `{"message_id":"v1","message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_v","action":"plan"}`},
		{"executor", `{"message_id":"v3","message_type":"notification","sender_id":"executor","receiver_id":"orch","workflow_id":"wf_v","action":"status"}`},
		{"orch", `{"message_id":"l1","message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_long","action":"status"}`},
		{"orch", `{"message_id":"l2","message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_long","action":"status"}`},
		{"orch", `{"message_id":"l3","message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_long","action":"status"}`},
		{"orch", `{"message_id":"s1","correlation_id":"corr_v","sender":{"agent_id":"orch"},"recipient":{"agent_id":"executor"},"message_type":"EVENT","payload":{"action":"go"}}`},
	} {
		if w := h.send(s.agent, s.body); w.Code != http.StatusOK && w.Code != http.StatusAccepted {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	return h
}

func ids(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var out []string
	for _, e := range jsonBody(t, w)["data"].([]any) {
		out = append(out, str(e.(map[string]any)["message_id"]))
	}
	return strings.Join(out, ",")
}

// TestHistoryVisibility: an agent reads only the messages of a thread it
// sent or received, oldest first; a thread with none of them is 404
// exactly as one that does not exist, so threads cannot be probed.
func TestHistoryVisibility(t *testing.T) {
	h := threadWith(t)
	reply := h.thread(mailbox.KeyWorkflow, "wf_v")[1].MessageID
	tests := []struct {
		agent, query string
		want         string // ids, or "" for 404
	}{
		{"orch", "workflow_id=wf_v", "v1," + reply + ",v3"},
		{"planner", "workflow_id=wf_v", "v1," + reply},
		{"executor", "workflow_id=wf_v", "v3"},
		{"small", "workflow_id=wf_v", ""},
		{"orch", "workflow_id=wf_nothing", ""},
		{"executor", "correlation_id=corr_v", "s1"},
		{"planner", "correlation_id=corr_v", ""},
	}
	var notFound []string
	for _, tc := range tests {
		t.Run(tc.agent+" "+tc.query, func(t *testing.T) {
			w := h.historyOf(tc.agent, tc.query)
			if tc.want == "" {
				e := decodeError(t, w, http.StatusNotFound, "not_found")
				notFound = append(notFound, param(e)+" "+strings.Replace(e.Error.Message, tc.agent, "<agent>", 1))
				return
			}
			if w.Code != http.StatusOK || ids(t, w) != tc.want {
				t.Fatalf("%d %s, want %s", w.Code, w.Body, tc.want)
			}
			out := jsonBody(t, w)
			kind, id, _ := strings.Cut(tc.query, "=")
			if out["object"] != "list" || out[kind] != id || out["has_more"] != false {
				t.Errorf("page %v", out)
			}
			first := out["data"].([]any)[0].(map[string]any)
			if first["origin"] != "agent" || str(first["payload_sha256"]) == "" || first["envelope"] == nil || first["sender"] == nil {
				t.Errorf("entry %v", first)
			}
		})
	}
	// Someone else's thread and no thread read alike.
	if len(notFound) != 3 || notFound[0] != notFound[1] {
		t.Errorf("404 answers differ: %q", notFound)
	}
}

// TestHistoryPaging: limit and cursor walk a thread over HTTP without
// gaps or repeats.
func TestHistoryPaging(t *testing.T) {
	h := threadWith(t)
	var got []string
	query := "workflow_id=wf_long&limit=2"
	for pages := 1; ; pages++ {
		w := h.historyOf("planner", query)
		if w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		got = append(got, ids(t, w))
		out := jsonBody(t, w)
		if out["has_more"] != true {
			if pages != 2 || out["next_cursor"] != nil {
				t.Errorf("%d pages, last %v", pages, out)
			}
			break
		}
		query = "workflow_id=wf_long&limit=2&cursor=" + str(out["next_cursor"])
	}
	if strings.Join(got, "|") != "l1,l2|l3" {
		t.Errorf("walked %v", got)
	}
}

// TestHistoryBadQueries: a malformed query is 400 naming the parameter.
func TestHistoryBadQueries(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	long := strings.Repeat("w", 129)
	for _, tc := range []struct{ name, query, param string }{
		{"no thread", "", "workflow_id"},
		{"two threads", "workflow_id=a&correlation_id=b", "workflow_id"},
		{"long workflow id", "workflow_id=" + long, "workflow_id"},
		{"long correlation id", "correlation_id=" + long, "correlation_id"},
		{"limit zero", "workflow_id=a&limit=0", "limit"},
		{"limit over 1000", "workflow_id=a&limit=1001", "limit"},
		{"cursor not a number", "workflow_id=a&cursor=x", "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := decodeError(t, h.historyOf("orch", tc.query), http.StatusBadRequest, "invalid_request")
			if param(e) != tc.param {
				t.Errorf("param %q, want %q", param(e), tc.param)
			}
		})
	}
}

// people authenticates the admin's and reviewers' tokens, as the approval
// service does.
type people map[string]string

func (p people) Person(r *http.Request) (string, error) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch who, ok := p[tok]; {
	case ok:
		return who, nil
	case tok == "":
		return "", apierror.Unauthorized("Missing bearer token.")
	}
	return "", apierror.Forbidden("This token may not read threads.")
}

// TestAdminHistory: the admin and reviewers read the whole thread, every
// participant's messages; each read is audited with who read which
// thread and how many messages; other tokens are refused.
func TestAdminHistory(t *testing.T) {
	h := threadWith(t)
	handler := h.svc.AdminHistory(people{"tok-admin": "admin:admin", "tok-reviewer": "reviewer:security-lead"})
	get := func(token, query string) *httptest.ResponseRecorder {
		r, _ := h.request(http.MethodGet, "/admin/messages?"+query, "", "")
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		return w
	}
	w := get("tok-reviewer", "workflow_id=wf_v")
	if w.Code != http.StatusOK || len(jsonBody(t, w)["data"].([]any)) != 3 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	reads := h.records(KindMessageRead)
	if len(reads) != 1 || fmt.Sprintf("%v %v %v %v", testkit.SummaryOf(reads[0])["reader"], testkit.SummaryOf(reads[0])["thread_kind"], testkit.SummaryOf(reads[0])["thread_id"], testkit.SummaryOf(reads[0])["messages"]) != "reviewer:security-lead workflow wf_v 3" {
		t.Errorf("message.read %+v", reads)
	}
	if w := get("tok-admin", "correlation_id=corr_v&limit=1"); w.Code != http.StatusOK || ids(t, w) != "s1" {
		t.Errorf("%d %s", w.Code, w.Body)
	}
	decodeError(t, get("tok-admin", "workflow_id=wf_nothing"), http.StatusNotFound, "not_found")
	decodeError(t, get("", "workflow_id=wf_v"), http.StatusUnauthorized, "invalid_api_key")
	decodeError(t, get("tok-orch", "workflow_id=wf_v"), http.StatusForbidden, "policy_denied")
	decodeError(t, get("tok-admin", "limit=5"), http.StatusBadRequest, "invalid_request")
	if n := len(h.records(KindMessageRead)); n != 3 {
		t.Errorf("%d message.read entries, want one per authorized read", n)
	}
	// No read without its audit entry.
	h.trail.SetFail(true)
	w = get("tok-admin", "workflow_id=wf_v")
	decodeError(t, w, http.StatusServiceUnavailable, "audit_unavailable")
	if strings.Contains(w.Body.String(), "v1") {
		t.Errorf("the thread was shown without an audit entry: %s", w.Body)
	}
}
