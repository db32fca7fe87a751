package audit

import (
	"slices"
	"strings"
)

// Policy kinds are written by the application when it reloads policies;
// they are named here because the rest of the list is.
const (
	KindPolicyReload = "policy.reload"
	KindPolicyShadow = "policy.shadow"
)

// kinds is every entry kind the gateway writes: this package's, and those
// of the packages that write their own (messaging, registry, workflow,
// mcp), which cannot be imported here. It is the one list "audit export
// --kind" is checked against, so a typo is an error rather than an empty
// export; TestKindsListsEveryWriter (cmd/gateway) holds the other
// packages' constants to it.
var kinds = []string{
	KindLLMRequest, KindLLMResponse, KindAuthFailure, KindRateLimitReject, KindConfigReload,
	KindAgentRequest, KindAgentDecision, KindEscalationDecision, KindRecovery, KindLoss,
	KindPolicyReload, KindPolicyShadow,
	"message.request", "message.response", "message.delivery", "message.reject", "message.escalation", "message.read",
	"registry.spawn", "registry.retire",
	"workflow.start", "workflow.step", "workflow.suspend", "workflow.resume", "workflow.end",
	"mcp.call", "mcp.result",
	"oauth.register", "oauth.grant", "oauth.token", "oauth.refuse",
}

// Kinds returns the entry kinds the gateway writes, sorted.
func Kinds() []string {
	out := slices.Clone(kinds)
	slices.Sort(out)
	return out
}

// KnownKind reports whether a --kind value selects something the gateway
// writes: one of Kinds, or a prefix pattern ("llm.*", "*") that at least
// one of them matches.
func KnownKind(k string) bool {
	if prefix, ok := strings.CutSuffix(k, "*"); ok {
		return slices.ContainsFunc(kinds, func(x string) bool { return strings.HasPrefix(x, prefix) })
	}
	return slices.Contains(kinds, k)
}

// KindPatterns are the kinds and their families ("llm.*"), the names a
// did-you-mean hint for --kind chooses from.
func KindPatterns() []string {
	out := Kinds()
	for _, k := range Kinds() {
		if family, _, ok := strings.Cut(k, "."); ok && !slices.Contains(out, family+".*") {
			out = append(out, family+".*")
		}
	}
	return out
}
