package app

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
)

// benchRequest is the first step of the ACL envelope's example flow (the
// orchestrator asks the planner to plan a workflow); the first %d numbers the
// message, the second the workflow (a thread holds at most 10,000 messages).
const benchRequest = `{"message_id":"msg_bench_%d","message_type":"request","sender_id":"orch_1","sender_type":"orchestrator","receiver_id":"planner_1","receiver_type":"planner","workflow_id":"wf_bench_%d","action":"plan_workflow","payload":{"operation":"update","target_customer_id":"CUST001","parameters":{"credit_limit":100000}},"priority":"high"}`

// benchResponse answers it; %s is the request's message_id.
const benchResponse = `{"message_type":"response","sender_id":"planner_1","receiver_id":"orch_1","in_reply_to":"%s","workflow_id":"wf_bench","action":"plan_complete","payload":{"tasks":[{"task_id":"t1","description":"Fetch customer","agent_type":"executor"},{"task_id":"t2","description":"Update record","agent_type":"executor"}]},"status":"success"}`

// benchPost posts body to url b.N times over one keep-alive client.
func benchPost(b *testing.B, url, token string) {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(fmt.Appendf(nil, benchRequest, i, i/4000)))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkRelayRequestResponse is one REQUEST relayed to an in-process
// recipient and its RESPONSE returned, through the whole gateway: identity,
// rate limit, envelope validation, RBAC, Rego messages.deny, audit
// (fail_mode closed: an fsync before the relay and one before the answer),
// history, the relay and the answer's validation.
func BenchmarkRelayRequestResponse(b *testing.B) {
	g := newA2A(b, a2aOpts{})
	g.peers["planner_1"].Set(func(w http.ResponseWriter, _ *http.Request, body []byte) { answer(w, body) })
	benchPost(b, g.srv.URL+"/relay/messages", "tok-orch_1")
}

// BenchmarkRelayRequestResponseAuditOpen is the same with fail_mode open:
// the audit entries are written off the request path.
func BenchmarkRelayRequestResponseAuditOpen(b *testing.B) {
	g := newA2A(b, a2aOpts{failMode: "open"})
	g.peers["planner_1"].Set(func(w http.ResponseWriter, _ *http.Request, body []byte) { answer(w, body) })
	benchPost(b, g.srv.URL+"/relay/messages", "tok-orch_1")
}

// BenchmarkBareProxyHop is the baseline: a bare httputil.ReverseProxy in
// front of the same recipient.
func BenchmarkBareProxyHop(b *testing.B) {
	recipient := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		answer(w, body)
	}))
	defer recipient.Close()
	u, _ := url.Parse(recipient.URL)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(u))
	defer proxy.Close()
	benchPost(b, proxy.URL+"/messages", "")
}

// answer is the recipient's work in every benchmark: find the request's
// message_id and reply to it.
func answer(w http.ResponseWriter, body []byte) {
	id := ""
	if i := bytes.Index(body, []byte(`"message_id":"`)); i >= 0 {
		rest := body[i+len(`"message_id":"`):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			id = string(rest[:j])
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, benchResponse, id)
}
