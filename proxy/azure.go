package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
)

// Azure OpenAI's data-plane API, for agents built on Azure OpenAI SDKs
// (openai-go's azure options, Python's AzureOpenAI, LangChain's
// AzureChatOpenAI) pointed at the gateway:
//
//	POST /openai/deployments/{deployment}/chat/completions?api-version=...
//	POST /openai/deployments/{deployment}/embeddings?api-version=...
//
// The wire format is OpenAI Chat Completions (and Embeddings) itself, so
// this is not a dialect: nothing is translated, input.dialect stays "chat",
// and the answer goes back as the chat chain writes it. Only the request's
// framing differs (the model is the path's deployment, the version a query
// parameter, the key in an api-key header, which identify reads on every
// route), and one stage after identify turns that framing into the
// ordinary request before the very stages of /v1/chat/completions and
// /v1/embeddings: the same read of the body, model allow-list, limits,
// Rego, redaction, protocol, send and audit.
//
// Azure's newer v1 API (base URL .../openai/v1, model in the body) is
// /v1 under a prefix, served by the /v1 chains (AzureV1).

// azureRoutes are the chains of the deployments routes.
type azureRoutes struct {
	chat, embeddings http.Handler
}

// AzureChatCompletions serves POST /openai/deployments/{deployment}/chat/completions.
func (g *Gateway) AzureChatCompletions() http.Handler { return g.azure.chat }

// AzureEmbeddings serves POST /openai/deployments/{deployment}/embeddings.
func (g *Gateway) AzureEmbeddings() http.Handler { return g.azure.embeddings }

// AzureV1ChatCompletions serves POST /openai/v1/chat/completions.
func (g *Gateway) AzureV1ChatCompletions() http.Handler { return azureV1(g.chat) }

// AzureV1Embeddings serves POST /openai/v1/embeddings.
func (g *Gateway) AzureV1Embeddings() http.Handler { return azureV1(g.embeddings) }

// azureV1 serves Azure's v1 API (/openai/v1/...) with h, a /v1 route's
// chain: the same request under another prefix, model in the body, no
// api-version needed (a query is ignored, as on /v1). The chain sees the
// path without the prefix because the upstream's URL is made from it.
// GET /openai/v1/models and /openai/v1/models/{id} need no such care (the
// path is not sent on) and are served by Models and Model as they are.
func azureV1(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := *r.URL
		u.Path = strings.TrimPrefix(u.Path, azureV1Prefix)
		u.RawPath = strings.TrimPrefix(u.RawPath, azureV1Prefix)
		r2 := r.WithContext(r.Context())
		r2.URL = &u
		h.ServeHTTP(w, r2)
	})
}

const (
	azureV1Prefix          = "/openai"
	azureDeploymentsPrefix = "/openai/deployments/"
)

// azureRequest is the stage, after identify, that reads the Azure framing:
// it requires api-version, takes the deployment in the path as the model
// (a body that names another model is refused, one that names none gets
// the deployment's), and hands the chat stages the ordinary request at the
// OpenAI path, without the query (the upstream is called with its own API
// version, if any; the agent's says which wire format it speaks, and
// every accepted one is the same). The body is only scanned at its top
// level here; ReadBody, next, is its one strict reading.
func azureRequest(kind Kind, suffix string) Stage {
	openAIPath := "/v1" + suffix
	return StageFunc(func(w http.ResponseWriter, r *http.Request, next http.Handler) error {
		ex := scope.Get(r.Context())
		deployment, err := deploymentOf(r.URL, suffix)
		if err != nil {
			return err
		}
		// Named on the audit entry of a refusal from here on; ReadBody
		// sets it again from the body, to the same value.
		ex.Model = deployment
		if err := checkAPIVersion(r.URL.RawQuery); err != nil {
			return err
		}
		raw, err := httpx.ReadLimited(r, int64(ex.Agent.MaxRequestSize))
		if err != nil {
			return err
		}
		body, err := withDeployment(kind, raw, deployment)
		if err != nil {
			return err
		}
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
		r2.URL.Path, r2.URL.RawPath, r2.URL.RawQuery = openAIPath, "", ""
		next.ServeHTTP(w, r2)
		return nil
	})
}

// deploymentOf is the deployment named in the path, read from the escaped
// path once (a deployment may hold an escaped '/'; the router's own
// parameter is escaped or not depending on the rest of the path).
func deploymentOf(u *url.URL, suffix string) (string, error) {
	seg, ok := strings.CutPrefix(u.EscapedPath(), azureDeploymentsPrefix)
	if ok {
		seg, ok = strings.CutSuffix(seg, suffix)
	}
	if !ok || seg == "" || strings.Contains(seg, "/") {
		return "", apierror.BadRequest("deployment", "The URL names no deployment: want /openai/deployments/{deployment}%s.", suffix)
	}
	d, err := url.PathUnescape(seg)
	if err != nil || d == "" || !utf8.ValidString(d) || strings.IndexFunc(d, unicode.IsControl) >= 0 {
		return "", apierror.BadRequest("deployment", "The deployment name in the URL is not a valid model name.")
	}
	return d, nil
}

// checkAPIVersion requires exactly one api-version, YYYY-MM-DD or
// YYYY-MM-DD-preview, and no other query parameter (none of these routes
// takes one; an unknown one is refused rather than ignored, and a case
// variant such as API-Version is unknown).
func checkAPIVersion(rawQuery string) error {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return apierror.BadRequest("api-version", "The query string could not be read: %v.", err)
	}
	for k := range q {
		if k != "api-version" {
			return apierror.BadRequest(k, "Unknown query parameter %q: an Azure OpenAI route takes api-version only.", k)
		}
	}
	vs := q["api-version"]
	switch {
	case len(vs) == 0:
		return apierror.BadRequest("api-version", "Missing required query parameter 'api-version' (an Azure OpenAI API version, such as 2024-10-21).")
	case len(vs) > 1:
		return apierror.BadRequest("api-version", "The query parameter 'api-version' is given %d times; give it once.", len(vs))
	case !validAPIVersion(vs[0]):
		return apierror.BadRequest("api-version", "api-version %q is not an Azure OpenAI API version: want YYYY-MM-DD or YYYY-MM-DD-preview.", vs[0])
	}
	return nil
}

// validAPIVersion: every dated version speaks the same chat completions
// wire format, so any real date is accepted, released or preview.
func validAPIVersion(v string) bool {
	date, ok := strings.CutSuffix(v, "-preview")
	if !ok {
		date = v
	}
	if len(date) != len(time.DateOnly) {
		return false
	}
	_, err := time.Parse(time.DateOnly, date)
	return err == nil
}

// withDeployment returns the body with the deployment as its model: as it
// was when its model is the deployment, with a "model" member added first
// when it has none. A body naming another model is refused, naming both:
// the path and the body must not say two things, or what is checked could
// differ from what is served.
func withDeployment(kind Kind, raw []byte, deployment string) ([]byte, error) {
	model, found, members, err := topLevelModel(raw)
	if errors.Is(err, errModelType) {
		return nil, apierror.BadRequest("model", "Invalid type for 'model': expected a string, the deployment's name (or no model at all).")
	}
	if err != nil {
		// Malformed: ReadBody's reading says why, in its words; should it
		// find nothing wrong, the refusal stands all the same.
		if _, derr := DecodeRequest(kind, raw); derr != nil {
			return nil, derr
		}
		return nil, apierror.BadRequest("", "Invalid request body: %v.", err)
	}
	if found {
		if model != deployment {
			return nil, apierror.BadRequest("model", "The body's model %q differs from the deployment %q in the URL: leave model out, or send the deployment's name.", model, deployment)
		}
		return raw, nil
	}
	member, err := jsontext.AppendQuote([]byte(`"model":`), deployment)
	if err != nil {
		return nil, apierror.BadRequest("deployment", "The deployment name in the URL is not a valid model name.")
	}
	if members > 0 {
		member = append(member, ',')
	}
	open := bytes.IndexByte(raw, '{') // the object's first byte: topLevelModel read it
	out := make([]byte, 0, len(raw)+len(member))
	out = append(out, raw[:open+1]...)
	out = append(out, member...)
	return append(out, raw[open+1:]...), nil
}

var errModelType = errors.New("'model' must be a string")

// topLevelModel reads a JSON object's top level (valid UTF-8, no duplicate
// names, nothing after it, as jsontext reads by default) for its "model"
// member, by its exact name; members counts the object's members.
func topLevelModel(raw []byte) (model string, found bool, members int, err error) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.ReadToken()
	if err != nil {
		return "", false, 0, err
	}
	if tok.Kind() != '{' {
		return "", false, 0, errors.New("the body is not a JSON object")
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return "", false, 0, err
		}
		members++
		if name.String() != "model" {
			if err := dec.SkipValue(); err != nil {
				return "", false, 0, err
			}
			continue
		}
		v, err := dec.ReadToken()
		if err != nil {
			return "", false, 0, err
		}
		if v.Kind() != '"' {
			return "", false, 0, errModelType
		}
		model, found = v.String(), true
	}
	if _, err := dec.ReadToken(); err != nil { // the closing brace
		return "", false, 0, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return "", false, 0, errors.New("something follows the JSON object")
	}
	return model, found, members, nil
}
