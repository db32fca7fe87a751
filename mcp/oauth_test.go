package mcp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// answering is a transport that answers every request with body, as JSON.
type answering []byte

func (b answering) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(b))}, nil
}

// fetch runs the client credentials grant against an endpoint answering
// body, through the gateway's strict reading.
func fetch(body []byte) (*oauth2.Token, error) {
	cfg := clientcredentials.Config{ClientID: "gw", ClientSecret: "s", TokenURL: "http://as.test/token"}
	client := strictClient(&http.Client{Transport: answering(body)})
	return cfg.Token(context.WithValue(context.Background(), oauth2.HTTPClient, client))
}

// TestTokenResponseStrict: answers that a lenient reader would take are
// refused: no access token, no type, another type, duplicate or case
// variant members, a number for the token, a token that would split a
// header, an expired one.
func TestTokenResponseStrict(t *testing.T) {
	for _, body := range []string{
		`{"token_type":"Bearer","expires_in":60}`,
		`{"access_token":"a","expires_in":60}`,
		`{"access_token":"a","token_type":"Bearer","access_token":"b"}`,
		`{"access_token":"a","token_type":"Bearer","ACCESS_TOKEN":"b"}`,
		`{"access_token":1,"token_type":"Bearer"}`,
		`{"access_token":"a","token_type":"Bearer","expires_in":"60"}`,
		`{"access_token":"a","token_type":"Bearer","expires_in":-5}`,
		`{"access_token":"a","token_type":"Bearer"} {}`,
		`access_token=a&token_type=Bearer`,
	} {
		if tok, err := fetch([]byte(body)); err == nil {
			t.Errorf("%s: read as %+v", body, tok)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{`{"access_token":"a","token_type":"mac"}`, "not a Bearer token"},
		{`{"access_token":"a b\r\nX: y","token_type":"Bearer"}`, "is not a token"},
	} {
		tok, err := fetch([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if _, err := checkToken(tok, time.Now()); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "X: y") {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.want)
		}
	}
	tok, err := fetch([]byte(`{"access_token":"good","token_type":"bearer","expires_in":40,"scope":"a b","id_token":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	ct, err := checkToken(tok, time.Now())
	if err != nil || ct.auth != "Bearer good" || time.Until(ct.until) > 31*time.Second || time.Until(ct.until) < 29*time.Second {
		t.Errorf("token %+v, %v: want Bearer good until 10s before its expiry", ct, err)
	}
}

// FuzzTokenResponse: whatever an authorization server answers, a token
// the gateway takes is the token the strict reading saw, fits in a header
// and is a Bearer token.
func FuzzTokenResponse(f *testing.F) {
	f.Add([]byte(`{"access_token":"a","token_type":"Bearer","expires_in":60}`))
	f.Add([]byte(`{"access_token":"a","token_type":"Bearer","Access_token":"b"}`))
	f.Add([]byte(`{"access_token":"\u0061","token_type":"BEARER","refresh_token":"r"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		strict, serr := readTokenResponse(body)
		tok, err := fetch(body)
		if err != nil {
			return
		}
		if serr != nil {
			t.Fatalf("taken although the strict reading refused it: %v", serr)
		}
		if tok.AccessToken != strict.AccessToken || tok.TokenType != strict.TokenType || tok.RefreshToken != strict.RefreshToken {
			t.Fatalf("oauth2 read %q/%q, the strict reading %q/%q", tok.AccessToken, tok.TokenType, strict.AccessToken, strict.TokenType)
		}
		if ct, err := checkToken(tok, time.Now()); err == nil && (!visibleASCII(ct.auth[len("Bearer "):]) || !strings.EqualFold(tok.TokenType, "bearer")) {
			t.Fatalf("took %q", ct.auth)
		}
	})
}
