package main

import (
	"math"
	"testing"
)

// A listing as `go tool pprof -traces` prints it: each sample's innermost
// frame on its first line. The audit encoding called from the policy stage
// counts as audit (innermost wins); a runtime-only sample is the rest.
const traces = `File: gateway-pprof
Type: cpu
Duration: 2s, Total samples = 60ms ( 3.00%)
-----------+-------------------------------------------------------
      10ms   runtime.mallocgc
             github.com/sacpgw/gateway/audit.(*Log).submit
             github.com/sacpgw/gateway/proxy.New.ChatPolicy.func10
-----------+-------------------------------------------------------
      20ms   github.com/sacpgw/gateway/policy.(*Engine).evaluate
             github.com/sacpgw/gateway/proxy.New.ChatPolicy.func10
-----------+-------------------------------------------------------
      30ms   runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
`

func TestSplitInnermostStage(t *testing.T) {
	totals, all := split([]byte(traces))
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if !near(all, 0.060) {
		t.Fatalf("all = %v s, want 0.060", all)
	}
	for name, want := range map[string]float64{stages[0].name: 0.010, "policy": 0.020, rest: 0.030} {
		if !near(totals[name], want) {
			t.Errorf("%s = %v s, want %v", name, totals[name], want)
		}
	}
}
