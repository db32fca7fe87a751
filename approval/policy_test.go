package approval

import (
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/policy"
)

// realPolicy is the policy package's engine over the shipped Rego.
func realPolicy(t *testing.T) *policy.Engine {
	t.Helper()
	e, err := policy.New(policy.Options{Dir: "../rego", NoWatch: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// The facts reach the shipped policy, which names each problem; its
// decision's confidence and location are the ones the agent gets.
func TestShippedPolicyJudgesFacts(t *testing.T) {
	h := factsHarness(t, func(d *Deps) { d.Decider = realPolicy(t) })
	valid := `{"title": "Login", "owner": "a@example.org"}`
	for _, tc := range []struct {
		note       string
		fields     map[string]any
		status     string
		rules      []string
		confidence float64
		// in the first violation's description
		says string
	}{
		// Citing no specification, an approval is a tenth less sure.
		{"a compliant create", map[string]any{"content": valid}, StatusApproved, nil, 0.9, ""},
		{"a modify of a target that exists", map[string]any{"action": "modify", "target_id": "design-001", "content": valid}, StatusApproved, nil, 0.9, ""},
		{"a modify of a target that does not", map[string]any{"action": "modify", "target_id": "design-999", "content": valid},
			StatusRejected, []string{"target.missing"}, 1, `design "design-999" does not exist`},
		{"content off its template", map[string]any{"content": `{"title": "x"}`},
			StatusRejected, []string{"content.template"}, 1, "/: missing property 'owner'"},
		{"a modify that closes a cycle", map[string]any{"action": "modify", "target_id": "req-045", "references": []string{"docs-001"}, "content": valid},
			StatusRejected, []string{"references.cycle"}, 1, "req-045 -> docs-001 -> req-045 (this request's target would close it)"},
		{"a cycle already there", map[string]any{"references": []string{"arch-001"}, "content": valid},
			StatusRejected, []string{"references.cycle"}, 1, "arch-001 -> design-001 -> arch-001 (already in"},
		{"a risky create", map[string]any{"risk_assessment": "high", "content": valid}, StatusEscalated, nil, 0.5, ""},
	} {
		t.Run(tc.note, func(t *testing.T) {
			req := approvalRequest()
			req["references"] = []string{}
			for k, v := range tc.fields {
				req[k] = v
			}
			res, resp := h.submit(tokClaude, req)
			mustStatus(t, res, http.StatusOK)
			var rules []string
			for _, v := range resp.Violations {
				rules = append(rules, v.Rule)
			}
			if resp.Status != tc.status || !slices.Equal(rules, tc.rules) || resp.Confidence != tc.confidence {
				t.Fatalf("status %s violations %v confidence %v, want %s %v %v: %s", resp.Status, rules, resp.Confidence, tc.status, tc.rules, tc.confidence, res.body)
			}
			if tc.says != "" && !strings.Contains(resp.Violations[0].Description, tc.says) {
				t.Errorf("description %q, want %q in it", resp.Violations[0].Description, tc.says)
			}
			if len(tc.rules) > 0 && resp.Violations[0].Suggestion == "" {
				t.Error("a violation without a suggestion")
			}
		})
	}

	// A CREATE without a path is placed at its assigned id.
	req := approvalRequest()
	delete(req, "target_path")
	req["content"], req["references"] = valid, []string{}
	res, resp := h.submit(tokClaude, req)
	mustStatus(t, res, http.StatusOK)
	want := AssignedID("design", resp.RequestID)
	if resp.AssignedID == nil || *resp.AssignedID != want || resp.ApprovedLocation == nil || *resp.ApprovedLocation != "design/"+want {
		t.Fatalf("assigned_id %v approved_location %v, want %s at design/%[3]s", resp.AssignedID, resp.ApprovedLocation, want)
	}
}
