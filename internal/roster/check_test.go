package roster

import (
	"fmt"
	"strings"
	"testing"
)

// problems is a confkit.Reporter that keeps the messages: a part checks
// its own section without the loader.
type problems []string

func (p *problems) Line(path ...string) int { return 0 }
func (p *problems) Has(path ...string) bool { return false }
func (p *problems) Add(_ int, format string, args ...any) {
	*p = append(*p, fmt.Sprintf(format, args...))
}
func (p *problems) Resolve(*string)                 {}
func (p *problems) Shown(s string) string           { return s }
func (p *problems) LookupEnv(string) (string, bool) { return "", false }

// TestCheckOnItsOwn: the roster fills in an agent's defaults and reports
// a shared token and an unknown recipient (with its did-you-mean), with
// the messages the loader has always given.
func TestCheckOnItsOwn(t *testing.T) {
	hash := HashTokenHex("t")
	agents := map[string]*Agent{
		"coder":    {TokenSHA256: hash, Messages: []MessageRule{{To: []string{"reveiwer"}, Actions: []string{"ask"}}}},
		"reviewer": {TokenSHA256: strings.ToUpper(hash)},
		"empty":    nil,
	}
	var got problems
	Check(&got, agents)
	want := []string{
		`agent "empty": empty entry`,
		`agent "reviewer": token_sha256 is also agent "coder"'s: each agent needs its own token`,
		`agent "coder": messages[0].to: unknown agent "reveiwer" (want an agent id, "*" or "broadcast") (did you mean "reviewer"?)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	c := agents["coder"]
	if c.ID != "coder" || c.ResponseFormat != "none" || c.MaxRequestSize != 1<<20 || c.CompletionEstimate != 1024 || c.TokenHash != HashToken("t") {
		t.Errorf("defaults not filled in: %+v", c)
	}
	if _, ok := agents["empty"]; ok {
		t.Error("the empty entry was kept")
	}
}

// TestCheckA2A: an A2A base URL is an http(s) URL without credentials,
// query or fragment (the card's path is appended to it).
func TestCheckA2A(t *testing.T) {
	for url, want := range map[string]string{
		"https://helper.internal:9000/base": "",
		"":                                  `agent "a": a2a.url: want an http or https URL`,
		"ftp://helper":                      `agent "a": a2a.url: want an http or https URL`,
		"https://u:p@helper":                `agent "a": a2a.url: want a base URL without credentials, query or fragment`,
		"https://helper/?key=1":             `agent "a": a2a.url: want a base URL without credentials, query or fragment`,
	} {
		var got problems
		Check(&got, map[string]*Agent{"a": {TokenSHA256: HashTokenHex("t"), A2A: &A2A{URL: url}}})
		if strings.Join(got, "\n") != want {
			t.Errorf("a2a.url %q: problems %q, want %q", url, got, want)
		}
	}
}
