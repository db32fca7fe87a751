package scope

import (
	"fmt"
	"testing"

	"github.com/sacpgw/gateway/audit"
)

// summaryOf is v as a reader of the trail sees it (numbers as float64).
func summaryOf(v Verdict) map[string]any {
	o := &audit.Object{}
	v.Encode(o)
	return o.Map()
}

// The audit entry's checks object is what compliance reads: each check
// writes its own fields and nothing else, and "applied, nothing found"
// keeps its zero count.
func TestVerdictSummary(t *testing.T) {
	tests := []struct {
		v    Verdict
		want string
	}{
		{Verdict{Check: CheckAuth, Verdict: "pass", Method: "token"}, "map[method:token verdict:pass]"},
		{Verdict{Check: CheckRedaction, Verdict: "applied"}, "map[count:0 verdict:applied]"},
		{Verdict{Check: CheckRedaction, Verdict: "disabled"}, "map[verdict:disabled]"},
		{Verdict{Check: CheckPolicy, Verdict: "deny", DecisionID: "d", Revision: "r", Reasons: []string{"no"}, FailClosed: true},
			"map[decision_id:d fail_closed:true reasons:[no] revision:r verdict:deny]"},
		{Verdict{Check: CheckLimits, Verdict: "pass", Requests: "10/s", Tokens: "1000/h", TokensReserved: 42},
			"map[requests:10/s tokens:1000/h tokens_reserved:42 verdict:pass]"},
	}
	for _, tc := range tests {
		if got := fmt.Sprint(summaryOf(tc.v)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.v.Check, got, tc.want)
		}
	}
}

func TestCheckReplacesAndLooksUp(t *testing.T) {
	ex := &Exchange{}
	ex.Check(Verdict{Check: CheckRedaction, Verdict: "applied", Count: 1})
	ex.Check(Verdict{Check: CheckAuth, Verdict: "pass"})
	ex.Check(Verdict{Check: CheckRedaction, Verdict: "applied", Count: 3})
	if len(ex.Checks) != 2 {
		t.Fatalf("checks %+v", ex.Checks)
	}
	if v, ok := ex.Verdict(CheckRedaction); !ok || v.Count != 3 {
		t.Fatalf("redaction %+v %v", v, ok)
	}
	if _, ok := ex.Verdict(CheckPolicy); ok {
		t.Fatal("a check that did not run was found")
	}
}
