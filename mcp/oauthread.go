package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"

	"github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/internal/strictjson"
)

// maxTokenResponse bounds an authorization server's answer.
const maxTokenResponse = 64 << 10

// tokenResponse is a successful token response (RFC 6749 5.1), as the
// gateway reads it before the oauth2 package does.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    *int64 `json:"expires_in,omitzero"`
	RefreshToken string `json:"refresh_token,omitzero"`
	Scope        string `json:"scope,omitzero"`
}

var tokenFields = strictjson.FromStruct(reflect.TypeFor[tokenResponse]())

// errTokenResponse is a token response the gateway does not read.
var errTokenResponse = errors.New("the token endpoint's answer is not a token response")

// readTokenResponse reads a successful token response strictly: JSON (no
// duplicate member, no case variant of a known one, nothing after it),
// the members of their types, an access token and a type given. The
// oauth2 package then reads the same bytes; what it sees is what was
// checked.
func readTokenResponse(body []byte) (tokenResponse, error) {
	var tr tokenResponse
	if err := strictjson.Check(body, tokenFields); err != nil {
		// strictjson's message may quote the answer: not passed on.
		return tr, fmt.Errorf("%w: not strict JSON", errTokenResponse)
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return tr, fmt.Errorf("%w: a member of the wrong type", errTokenResponse)
	}
	switch {
	case tr.AccessToken == "":
		return tr, fmt.Errorf("%w: no access_token", errTokenResponse)
	case tr.TokenType == "":
		return tr, fmt.Errorf("%w: no token_type", errTokenResponse)
	case tr.ExpiresIn != nil && *tr.ExpiresIn <= 0:
		return tr, fmt.Errorf("%w: expires_in is not positive", errTokenResponse)
	}
	return tr, nil
}

// strictTokens is the transport of the gateway's requests to authorization
// servers: a successful answer that is not a token response as
// readTokenResponse reads it fails the request (before the oauth2 package,
// which reads leniently, sees it).
type strictTokens struct{ next http.RoundTripper }

func (s strictTokens) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(req)
	if err != nil || resp.StatusCode/100 != 2 {
		return resp, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	if err != nil {
		return nil, fmt.Errorf("reading the token endpoint's answer: %w", err)
	}
	if len(body) > maxTokenResponse {
		return nil, fmt.Errorf("%w: larger than %d bytes", errTokenResponse, maxTokenResponse)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return nil, fmt.Errorf("%w: of media type %q", errTokenResponse, mt)
	}
	if _, err := readTokenResponse(body); err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// strictClient is client with its transport behind strictTokens.
func strictClient(client *http.Client) *http.Client {
	next := client.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c := *client
	c.Transport = strictTokens{next}
	return &c
}
