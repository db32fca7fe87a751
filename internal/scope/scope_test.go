package scope

import "testing"

func TestUsagePlusKeepsCachedTokens(t *testing.T) {
	a := Usage{PromptTokens: 100, CompletionTokens: 5, TotalTokens: 105, PromptTokensDetails: &PromptTokensDetails{CachedTokens: 80}}
	b := Usage{PromptTokens: 120, CompletionTokens: 7, TotalTokens: 127}
	got := a.Plus(b)
	if got.PromptTokens != 220 || got.CompletionTokens != 12 || got.TotalTokens != 232 || got.PromptTokensDetails == nil || got.PromptTokensDetails.CachedTokens != 80 {
		t.Errorf("a+b = %+v (details %+v)", got, got.PromptTokensDetails)
	}
	if got := b.Plus(b); got.PromptTokensDetails != nil {
		t.Errorf("no details on either side: %+v", got.PromptTokensDetails)
	}
	if _ = a.Plus(a); a.PromptTokensDetails.CachedTokens != 80 {
		t.Error("Plus changed its receiver's details")
	}
}
