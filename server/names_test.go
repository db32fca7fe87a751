package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/shared"
)

// An address used as a metadata key, sent by the official client: with
// block: [email] the request is refused (400 content_filter) and never
// reaches the provider; without, the provider gets the key masked and the
// audit entry counts it.
func TestMemberNamesEndToEnd(t *testing.T) {
	const addr = "alice@example.com"
	params := userParams("gpt-4o-mini", "hi")
	params.Metadata = shared.Metadata{addr: "v"}
	up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(completion("ok")))
	})

	blocking := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", protocolExtra: "  redaction:\n    requests: true\n    block: [email]\n"})
	_, err := blocking.client("tok-alpha").Chat.Completions.New(context.Background(), params)
	if e := apiErr(t, err); e.StatusCode != http.StatusBadRequest || e.Code != "content_filter" || strings.Contains(e.RawJSON(), addr) {
		t.Errorf("blocked: %d %s", e.StatusCode, e.RawJSON())
	}
	if n := up.hits.Load(); n != 0 {
		t.Fatalf("a blocked request reached the provider (%d)", n)
	}

	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", protocolExtra: "  redaction:\n    requests: true\n"})
	if _, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	if sent, _ := up.lastBody.Load().(string); strings.Contains(sent, addr) || !strings.Contains(sent, `"metadata":{"[REDACTED:email]":"v"}`) {
		t.Errorf("the provider received %s", sent)
	}
	entries, raw := st.entries()
	if strings.Contains(raw, addr) {
		t.Errorf("the audit trail holds the address")
	}
	var counted bool
	for _, e := range entries {
		checks, _ := e.Summary["checks"].(map[string]any)
		red, _ := checks["request_redaction"].(map[string]any)
		counts, _ := e.Summary["redactions"].(map[string]any)
		if red["verdict"] == "applied" && red["count"] == float64(1) && counts["email"] == float64(1) {
			counted = true
		}
	}
	if !counted {
		t.Errorf("no entry counts the masked name: %s", raw)
	}
}
