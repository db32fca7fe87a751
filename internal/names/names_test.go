package names

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, ok := range []string{"claude-3", "vendor_onboarding_agent", "VISA_AGENT", "orch_1", "a", "agent.v2", strings.Repeat("a", 63)} {
		if err := Check(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "gateway", "Gateway", "human", "<script>x</script>", "-lead", "_x", "a b", "a/b", "é", strings.Repeat("a", 64), "a\n"} {
		if Check(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
