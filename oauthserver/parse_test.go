package oauthserver

import (
	"strings"
	"testing"
)

// TestParseRegistration: the metadata a client registers is read once,
// strictly: redirect URIs a browser would run, or that leave loopback in
// clear, or carry a fragment, are refused; a member twice, or a case
// variant of a known one, is refused; unknown members are ignored (RFC
// 7591 asks it); every client is public whatever method it asked for.
func TestParseRegistration(t *testing.T) {
	ok := []string{
		`{"redirect_uris":["http://127.0.0.1:33418/"],"client_name":"Visual Studio Code","grant_types":["authorization_code","refresh_token"],"token_endpoint_auth_method":"none"}`,
		`{"redirect_uris":["https://vscode.dev/redirect"],"logo_uri":"https://x.example/l.png","software_id":"x","application_type":"web"}`,
		`{"redirect_uris":["http://localhost:6274/oauth/callback"],"token_endpoint_auth_method":"client_secret_basic"}`,
		`{"redirect_uris":["cursor://anysphere.cursor-retrieval/oauth/user-files/callback"]}`,
		`{"redirect_uris":["http://[::1]:8080/cb"]}`,
	}
	for _, body := range ok {
		if _, err := parseRegistration([]byte(body)); err != nil {
			t.Errorf("%s: refused: %v", body, err)
		}
	}
	for _, c := range []struct{ body, want string }{
		{`{}`, "invalid_redirect_uri"},
		{`{"redirect_uris":[]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["javascript:alert(1)"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["data:text/html,x"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["http://evil.example/cb"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["http://127.0.0.1.evil.example/cb"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["https://a.example/cb#frag"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["https://user:pw@a.example/cb"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["/relative"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":"https://a.example/cb"}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://a.example/cb"],"redirect_uris":["https://b.example/cb"]}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://a.example/cb"],"Redirect_URIs":["https://b.example/cb"]}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://a.example/cb"],"grant_types":["client_credentials"]}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://a.example/cb"],"grant_types":["refresh_token"]}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://a.example/cb"],"response_types":["token"]}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://a.example/cb"],"client_name":"a\u0000b"}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://a.example/cb"],"client_name":"` + strings.Repeat("x", 101) + `"}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://a.example/cb"]} {}`, "invalid_client_metadata"},
		{"{\"redirect_uris\":[\"https://a.example/\xff\"]}", "invalid_client_metadata"},
	} {
		_, err := parseRegistration([]byte(c.body))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %s", c.body, err, c.want)
		}
	}
}

// TestParseTokenForm: a parameter sent twice is refused (RFC 6749 3.2),
// an empty one is absent, unknown ones are ignored.
func TestParseTokenForm(t *testing.T) {
	f, err := parseTokenForm("grant_type=authorization_code&code=c&code_verifier=&extra=1")
	if err != nil || f["code"] != "c" || f["grant_type"] != "authorization_code" {
		t.Fatalf("%v %v", f, err)
	}
	if _, ok := f["code_verifier"]; ok {
		t.Fatal("an empty parameter counted as sent")
	}
	for _, body := range []string{"code=a&code=b", "grant_type=x&grant_type=x", "a=%zz"} {
		if _, err := parseTokenForm(body); err == nil {
			t.Errorf("%q: accepted", body)
		}
	}
}

// FuzzParseRegistration: no input panics, and whatever is accepted has
// 1 to 10 redirect URIs that pass the redirect rule, and a bounded name.
func FuzzParseRegistration(f *testing.F) {
	f.Add([]byte(`{"redirect_uris":["http://127.0.0.1:33418/"],"client_name":"VS Code","grant_types":["authorization_code","refresh_token"]}`))
	f.Add([]byte(`{"redirect_uris":["cursor://x/cb"],"Client_Name":"x"}`))
	f.Add([]byte(`{"redirect_uris":["https://a.example/cb"],"redirect_uris":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := parseRegistration(body)
		if err != nil {
			return
		}
		if len(c.RedirectURIs) == 0 || len(c.RedirectURIs) > maxRedirectURIs || len([]rune(c.Name)) > maxClientName {
			t.Fatalf("accepted %+v", c)
		}
		for _, u := range c.RedirectURIs {
			if checkRedirectURI(u) != nil {
				t.Fatalf("accepted redirect URI %q", u)
			}
		}
	})
}

// FuzzParseTokenForm: no input panics; an accepted form names no
// parameter twice and holds no empty value.
func FuzzParseTokenForm(f *testing.F) {
	f.Add("grant_type=authorization_code&code=c&code_verifier=v&client_id=x&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcb")
	f.Add("grant_type=refresh_token&refresh_token=r&refresh_token=s")
	f.Fuzz(func(t *testing.T, body string) {
		m, err := parseTokenForm(body)
		if err != nil {
			return
		}
		for k, v := range m {
			if v == "" {
				t.Fatalf("empty %q accepted", k)
			}
		}
	})
}

// TestFormTarget: the consent page's form-action source is built from a
// parsed redirect URI and cannot carry another CSP directive.
func TestFormTarget(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:9/callback":        "http://127.0.0.1:9",
		"https://vscode.dev/redirect":        "https://vscode.dev",
		"cursor://anysphere.cursor/callback": "cursor://anysphere.cursor",
		"myapp:/cb":                          "myapp:",
	} {
		if got := formTarget(in); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
	if got := formTarget("https://a.example;script-src/x"); strings.ContainsAny(got, "; ") {
		t.Errorf("a host with ';' made %q", got)
	}
}
