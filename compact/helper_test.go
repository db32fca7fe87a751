package compact

import (
	"os"
	"path/filepath"
	"testing"
)

// seedVerbs and seedTools define the verbs and tools used by compact SACP's
// own examples (its plans, its library and its registry), with types on some
// inputs so that parameter checks have something to check.
func seedVerbs() []Verb {
	return []Verb{
		{Name: "s", Description: "search (alias)", Inputs: []string{"c:string", "p_max:number", "am:array"}, Outputs: "results"},
		{Name: "search", Description: "Finds items matching filters.", Inputs: []string{"c", "p_max"}, Outputs: "results"},
		{Name: "r", Description: "rank (alias)", Inputs: []string{"c:array", "w:array"}, Outputs: "ranking"},
		{Name: "p", Description: "present (alias)", Inputs: []string{"n:integer"}, Outputs: "string"},
		{Name: "extract", Description: "Extracts a document range.", Inputs: []string{"range:string", "src"}, Outputs: "document"},
		{Name: "analyze", Description: "Analyzes a document.", Inputs: []string{"lang:string"}, Outputs: "analysis"},
		{Name: "generate", Description: "Creates a new textual or code artifact.", Inputs: []string{"type:string", "length:string", "topic:string"}, Outputs: "string"},
		{Name: "fetch", Description: "Fetches history.", Inputs: []string{"c:string", "days:integer"}, Outputs: "history"},
		{Name: "predict", Description: "Predicts prices.", Inputs: []string{"ctx.history", "method:string", "window:integer"}, Outputs: "predictions"},
		{Name: "flag", Description: "Sets options.", Inputs: []string{"on:boolean", "opts:object", "x:any"}, Outputs: "ok"},
	}
}

func seedTools() []Tool {
	return []Tool{
		{ID: "H_API", Description: "External API to search for hotels by filters", Interface: "https://api.hotelprovider.com/docs", SupportedVerbs: []string{"s", "search"}},
		{ID: "RANK", Description: "Ranks results.", SupportedVerbs: []string{"r"}},
		{ID: "PRES", Description: "Presents results.", SupportedVerbs: []string{"p"}},
		{ID: "FEEDBACK_DOC", Description: "Feedback documents.", SupportedVerbs: []string{"extract"}},
		{ID: "SENTIMENT", Description: "Sentiment analysis.", SupportedVerbs: []string{"analyze"}},
		{ID: "SUMMARY", Description: "Summaries.", SupportedVerbs: []string{"generate"}},
		{ID: "PRICE_HIST", Description: "Price history.", SupportedVerbs: []string{"fetch"}},
		{ID: "PRC_EST", Description: "Price estimation.", SupportedVerbs: []string{"predict"}},
		{ID: "OPTS", Description: "Options.", SupportedVerbs: []string{"flag"}},
		{ID: "PRICES", Description: "Current prices.", SupportedVerbs: []string{"fetch"}},
	}
}

// aliasLibrary is the library of compact SACP's examples as
// config/registry.yaml defines it: "s", "r" and "p" are aliases of search,
// rank and present rather than verbs of their own, and join has a tool.
func aliasLibrary(t testing.TB) *Library {
	t.Helper()
	lib, err := NewLibrary(
		[]Verb{
			{Name: "search", Aliases: []string{"s"}, Inputs: []string{"c:string", "p_max:number"}, Outputs: "list"},
			{Name: "rank", Aliases: []string{"r"}, Inputs: []string{"c:array"}, Outputs: "list"},
			{Name: "present", Aliases: []string{"p", "show"}, Inputs: []string{"n:integer"}, Outputs: "string"},
			{Name: "extract", Inputs: []string{"range:string"}, Outputs: "object"},
			{Name: "analyze", Outputs: "object"},
			{Name: "generate", Inputs: []string{"type:string", "length:string", "topic:string"}, Outputs: "string"},
			{Name: "fetch", Inputs: []string{"c:string", "days:integer"}, Outputs: "history"},
			{Name: "predict", Inputs: []string{"ctx.history", "method:string", "window:integer"}, Outputs: "predictions"},
			{Name: "join", Aliases: []string{"j"}, Outputs: "object"},
		},
		[]Tool{
			{ID: "H_API", SupportedVerbs: []string{"search"}},
			{ID: "RANK", SupportedVerbs: []string{"rank"}},
			{ID: "PRES", SupportedVerbs: []string{"present"}},
			{ID: "FEEDBACK_DOC", SupportedVerbs: []string{"extract"}},
			{ID: "SENTIMENT", SupportedVerbs: []string{"analyze"}},
			{ID: "SUMMARY", SupportedVerbs: []string{"generate"}},
			{ID: "PRICES", SupportedVerbs: []string{"fetch"}},
			{ID: "PRICE_HIST", SupportedVerbs: []string{"fetch"}},
			{ID: "PRC_EST", SupportedVerbs: []string{"predict"}},
			{ID: "MERGE", SupportedVerbs: []string{"join"}},
		})
	if err != nil {
		t.Fatalf("NewLibrary: %v", err)
	}
	return lib
}

func seedLibrary(t testing.TB) *Library {
	t.Helper()
	lib, err := NewLibrary(seedVerbs(), seedTools())
	if err != nil {
		t.Fatalf("NewLibrary: %v", err)
	}
	return lib
}

// joinLibrary is seedLibrary plus a tool that supports join, which makes join
// steps name a real tool.
func joinLibrary(t testing.TB) *Library {
	t.Helper()
	lib, err := seedLibrary(t).Extend(
		[]Verb{{Name: "join", Description: "Merges branches.", Inputs: []string{"how:string"}}},
		[]Tool{{ID: "MERGE", Description: "Merges.", SupportedVerbs: []string{"join"}}, {ID: "CONCAT", Description: "Concatenates.", SupportedVerbs: []string{"s"}}})
	if err != nil {
		t.Fatalf("Extend: %v", err)
	}
	return lib
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testdataFiles(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no fixtures in testdata/%s: %v", dir, err)
	}
	return names
}
