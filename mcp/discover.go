package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"golang.org/x/oauth2"

	"github.com/sacpgw/gateway/internal/strictjson"
	"github.com/sacpgw/gateway/mcp/mcpconf"
)

// resourceMetadata is a server's protected resource metadata (RFC 9728),
// the members the gateway reads.
type resourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
}

// serverMetadata is an authorization server's metadata (RFC 8414), the
// members the gateway reads.
type serverMetadata struct {
	Issuer                        string   `json:"issuer"`
	AuthorizationEndpoint         string   `json:"authorization_endpoint"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	CodeChallengeMethodsSupported []string `json:"code_challenge_methods_supported"`
}

var (
	resourceFields = strictjson.FromStruct(reflect.TypeFor[resourceMetadata]())
	serverFields   = strictjson.FromStruct(reflect.TypeFor[serverMetadata]())
)

// errMetadata is a metadata document the gateway does not read.
var errMetadata = errors.New("the authorization metadata is unusable")

// readResourceMetadata reads RFC 9728 metadata strictly: it must name the
// resource it was asked for and an authorization server the gateway may
// send a client secret to.
func readResourceMetadata(body []byte, resource string) (string, error) {
	var m resourceMetadata
	if strictjson.Check(body, resourceFields) != nil || json.Unmarshal(body, &m) != nil {
		return "", fmt.Errorf("%w: the protected resource metadata is not strict JSON of its shape", errMetadata)
	}
	switch {
	case m.Resource != resource:
		return "", fmt.Errorf("%w: the protected resource metadata names another resource", errMetadata)
	case len(m.AuthorizationServers) == 0 || !mcpconf.SecureURL(m.AuthorizationServers[0]):
		return "", fmt.Errorf("%w: the protected resource metadata names no https authorization server", errMetadata)
	}
	return m.AuthorizationServers[0], nil
}

// readServerMetadata reads RFC 8414 metadata strictly: the issuer asked
// for, https endpoints, and PKCE with S256 (which MCP requires).
func readServerMetadata(body []byte, issuer string) (oauth2.Endpoint, error) {
	var m serverMetadata
	if strictjson.Check(body, serverFields) != nil || json.Unmarshal(body, &m) != nil {
		return oauth2.Endpoint{}, fmt.Errorf("%w: the authorization server metadata is not strict JSON of its shape", errMetadata)
	}
	switch {
	case m.Issuer != issuer:
		return oauth2.Endpoint{}, fmt.Errorf("%w: the authorization server metadata names another issuer", errMetadata)
	case !mcpconf.SecureURL(m.AuthorizationEndpoint) || !mcpconf.SecureURL(m.TokenEndpoint):
		return oauth2.Endpoint{}, fmt.Errorf("%w: the authorization server's endpoints are not https", errMetadata)
	case !slices.Contains(m.CodeChallengeMethodsSupported, "S256"):
		return oauth2.Endpoint{}, fmt.Errorf("%w: the authorization server does not offer PKCE with S256", errMetadata)
	}
	return oauth2.Endpoint{AuthURL: m.AuthorizationEndpoint, TokenURL: m.TokenEndpoint}, nil
}

// wellKnown is u's metadata address under name: the well-known path
// between the host and u's own path (RFC 8414 3.1, RFC 9728 3.1).
func wellKnown(u, name string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	path := strings.TrimSuffix(p.Path, "/")
	return (&url.URL{Scheme: p.Scheme, Host: p.Host, Path: "/.well-known/" + name + path}).String(), nil
}

// endpoints are the authorization server's endpoints: configured, else
// discovered once from the server's metadata.
func (c *delegatedCreds) endpoints(ctx context.Context) (*oauth2.Endpoint, error) {
	if c.cfg.AuthorizationURL != "" && c.cfg.TokenURL != "" {
		return &oauth2.Endpoint{AuthURL: c.cfg.AuthorizationURL, TokenURL: c.cfg.TokenURL}, nil
	}
	c.mu.Lock()
	ep := c.ep
	c.mu.Unlock()
	if ep != nil {
		return ep, nil
	}
	found, err := c.discover(ctx)
	if err != nil {
		return nil, err
	}
	if c.cfg.AuthorizationURL != "" {
		found.AuthURL = c.cfg.AuthorizationURL
	}
	if c.cfg.TokenURL != "" {
		found.TokenURL = c.cfg.TokenURL
	}
	c.mu.Lock()
	c.ep = &found
	c.mu.Unlock()
	return &found, nil
}

func (c *delegatedCreds) discover(ctx context.Context) (oauth2.Endpoint, error) {
	prm, err := wellKnown(c.url, "oauth-protected-resource")
	if err != nil {
		return oauth2.Endpoint{}, fmt.Errorf("%w: %w", errMetadata, err)
	}
	body, err := c.getMetadata(ctx, prm)
	if err != nil {
		return oauth2.Endpoint{}, err
	}
	issuer, err := readResourceMetadata(body, c.url)
	if err != nil {
		return oauth2.Endpoint{}, err
	}
	asm, err := wellKnown(issuer, "oauth-authorization-server")
	if err != nil {
		return oauth2.Endpoint{}, fmt.Errorf("%w: %w", errMetadata, err)
	}
	if body, err = c.getMetadata(ctx, asm); err != nil {
		return oauth2.Endpoint{}, err
	}
	return readServerMetadata(body, issuer)
}

// getMetadata reads one metadata document (JSON, bounded).
func (c *delegatedCreds) getMetadata(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMetadata, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.meta.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: it could not be fetched", errMetadata)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse+1))
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || resp.StatusCode != http.StatusOK || len(body) > maxTokenResponse || mt != "application/json" {
		return nil, fmt.Errorf("%w: %s answered HTTP %d", errMetadata, u, resp.StatusCode)
	}
	return body, nil
}
