package scope

import (
	"encoding/json"
	"testing"
)

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

// A usage object decodes through the strict reader: an unreadable one
// decodes (the answer around it stays readable) with no counts and the
// reason, and an exchange that saw one knows no usage, whatever follows.
func TestUsageUnreadable(t *testing.T) {
	var doc struct {
		Usage *Usage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(`{"usage":{"prompt_tokens":-100000,"completion_tokens":5,"total_tokens":-99995}}`), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Usage.Unreadable != "prompt_tokens is negative" || doc.Usage.PromptTokens != 0 || doc.Usage.TotalTokens != 0 {
		t.Fatalf("usage = %+v", doc.Usage)
	}
	good := Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}
	if got := good.Plus(*doc.Usage); got.Unreadable == "" || got.TotalTokens != 0 {
		t.Errorf("good + unreadable = %+v", got)
	}
	var ex Exchange
	ex.Report(*doc.Usage)
	ex.Report(good)
	if ex.UsageKnown || ex.UsageUnreadable != "prompt_tokens is negative" || ex.Usage.TotalTokens != 0 {
		t.Errorf("exchange after an unreadable report: known %v, unreadable %q, usage %+v", ex.UsageKnown, ex.UsageUnreadable, ex.Usage)
	}
	var ok Exchange
	ok.Report(good)
	if !ok.UsageKnown || ok.Usage.TotalTokens != 2 {
		t.Errorf("a readable report: %+v", ok.Usage)
	}
	if err := json.Unmarshal([]byte(`{"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}`), &doc); err != nil {
		t.Fatal(err)
	}
	if u := doc.Usage; u.Unreadable != "" || u.TotalTokens != 12 || u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens != 4 {
		t.Errorf("readable usage = %+v", u)
	}
}
