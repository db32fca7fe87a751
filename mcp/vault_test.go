package mcp

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/mcp/mcpconf"
)

const (
	keyA = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	keyB = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA="
)

// TestSealer: a sealed token opens for its server and person only, names
// its key, and still opens after the key is rotated (the old key as
// previous_token_key); without its key it does not.
func TestSealer(t *testing.T) {
	a, err := newSealer(mcpconf.Settings{TokenKey: keyA})
	if err != nil {
		t.Fatal(err)
	}
	blob := a.seal("docs", "u-ada", []byte(`{"access":"dt-1"}`))
	if bytes.Contains(blob, []byte("dt-1")) || !strings.HasPrefix(string(blob), "v1."+a.current+".") {
		t.Fatalf("blob %q", blob)
	}
	if plain, err := a.open("docs", "u-ada", blob); err != nil || string(plain) != `{"access":"dt-1"}` {
		t.Errorf("open: %q, %v", plain, err)
	}
	for _, who := range [][2]string{{"docs", "u-bob"}, {"files", "u-ada"}} {
		if _, err := a.open(who[0], who[1], blob); err == nil {
			t.Errorf("opens as %v", who)
		}
	}
	rotated, err := newSealer(mcpconf.Settings{TokenKey: keyB, PreviousTokenKey: keyA})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rotated.open("docs", "u-ada", blob); err != nil {
		t.Errorf("after rotation: %v", err)
	}
	if again := rotated.seal("docs", "u-ada", []byte("x")); !strings.HasPrefix(string(again), "v1."+rotated.current+".") || rotated.current == a.current {
		t.Errorf("sealed after rotation under %q", again)
	}
	only, err := newSealer(mcpconf.Settings{TokenKey: keyB})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := only.open("docs", "u-ada", blob); err == nil {
		t.Error("opens without its key")
	}
	tampered := bytes.Clone(blob)
	tampered[len(tampered)-2] ^= 1
	if _, err := a.open("docs", "u-ada", tampered); err == nil {
		t.Error("a damaged blob opens")
	}
}

// TestMetadataStrict: the metadata documents must name what was asked
// for, https endpoints and PKCE S256, in strict JSON.
func TestMetadataStrict(t *testing.T) {
	const res = "https://docs.example/mcp"
	if as, err := readResourceMetadata([]byte(`{"resource":"https://docs.example/mcp","authorization_servers":["https://as.example"],"scopes_supported":["a"]}`), res); err != nil || as != "https://as.example" {
		t.Errorf("good resource metadata: %q, %v", as, err)
	}
	for _, body := range []string{
		`{"resource":"https://evil.example/mcp","authorization_servers":["https://as.example"]}`,
		`{"resource":"https://docs.example/mcp","authorization_servers":["http://as.example"]}`,
		`{"resource":"https://docs.example/mcp","authorization_servers":[]}`,
		`{"resource":"https://docs.example/mcp","Resource":"x","authorization_servers":["https://as.example"]}`,
		`{"resource":"https://docs.example/mcp","authorization_servers":["https://as.example"]}x`,
	} {
		if _, err := readResourceMetadata([]byte(body), res); err == nil {
			t.Errorf("%s: read", body)
		}
	}
	good := `{"issuer":"https://as.example","authorization_endpoint":"https://as.example/a","token_endpoint":"https://as.example/t","code_challenge_methods_supported":["S256"]}`
	if ep, err := readServerMetadata([]byte(good), "https://as.example"); err != nil || ep.TokenURL != "https://as.example/t" {
		t.Errorf("good server metadata: %+v, %v", ep, err)
	}
	for _, body := range []string{
		strings.Replace(good, `"S256"`, `"plain"`, 1),
		strings.Replace(good, `https://as.example/t`, `http://as.example/t`, 1),
		strings.Replace(good, `"issuer":"https://as.example"`, `"issuer":"https://other.example"`, 1),
		strings.Replace(good, `{`, `{"token_endpoint":"https://evil.example/t",`, 1),
	} {
		if _, err := readServerMetadata([]byte(body), "https://as.example"); err == nil {
			t.Errorf("%s: read", body)
		}
	}
}

// FuzzMetadata: whatever a server or an authorization server publishes,
// what the gateway takes from it is an https (or loopback) endpoint with
// PKCE S256, for the resource and issuer asked for.
func FuzzMetadata(f *testing.F) {
	f.Add([]byte(`{"resource":"https://d/mcp","authorization_servers":["https://as"]}`))
	f.Add([]byte(`{"issuer":"https://as","authorization_endpoint":"https://as/a","token_endpoint":"https://as/t","code_challenge_methods_supported":["S256"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if as, err := readResourceMetadata(body, "https://d/mcp"); err == nil && !mcpconf.SecureURL(as) {
			t.Fatalf("took authorization server %q", as)
		}
		if ep, err := readServerMetadata(body, "https://as"); err == nil && (!mcpconf.SecureURL(ep.AuthURL) || !mcpconf.SecureURL(ep.TokenURL)) {
			t.Fatalf("took endpoints %+v", ep)
		}
	})
}
