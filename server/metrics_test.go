package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestMetricsEndpoint(t *testing.T) {
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion("mail bob@example.com"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	readAll(t, st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`).Body)
	readAll(t, st.post("/v1/chat/completions", "tok-nobody", `{}`).Body)
	want := []string{
		`gateway_requests_total{agent="alpha",route="/v1/chat/completions",status="200"} 1`,
		`gateway_requests_total{agent="unidentified",route="/v1/chat/completions",status="401"} 1`,
		`gateway_redactions_total{detector="email"} 1`,
		`gateway_tokens_total{agent="alpha",kind="prompt"} 7`,
		`gateway_policy_decisions_total{point="chat",verdict="allow"} 1`,
		`gateway_upstream_duration_seconds_count{upstream="test"} 1`,
		`gateway_audit_entries_total`,
	}
	var body string
	// The access log (and the metrics) run just after the answer is sent.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(st.srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body = readAll(t, resp.Body)
		if strings.Contains(body, want[1]) && strings.Contains(body, want[0]) {
			break
		}
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
	if strings.Contains(body, "req_") || strings.Contains(body, "gpt-4o-mini") {
		t.Error("unbounded values (request ids, client models) in metric labels")
	}
}
