package proxy

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/dialect/anthropic"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/upstream"
)

// Token counting, POST /v1/messages/count_tokens (Anthropic's; Claude-based
// command-line tools call it before they send). It is governed as a
// message: the agent identified, the body read through its size limit and
// translated into the neutral form by the Messages dialect, the model
// checked against its allow-list, one request of its rate_limit spent
// (no tokens: nothing is generated), the prompt redacted when requests are,
// and one llm.request and one llm.response entry written; a protocol
// agent's prompt gets the protocol prompt its messages get. The count is
// then the provider's when the model is served by an anthropic upstream,
// or the gateway's own estimate (the one its token limits reserve)
// otherwise. The answer is Anthropic's, {"input_tokens": N}, and its
// header CountSourceHeader says which it is.

// CountSourceHeader names where a token count came from: CountFromUpstream
// or CountEstimated.
const CountSourceHeader = "X-Gateway-Token-Count"

// The values of CountSourceHeader.
const (
	CountFromUpstream = "upstream" // the model's provider (an anthropic upstream) counted it
	CountEstimated    = "estimate" // the gateway estimated it (about four bytes a token)
)

// countPath is the operation asked of an anthropic upstream.
const countPath = "/v1/messages/count_tokens"

// maxCountAnswer bounds a provider's count answer: a few bytes are expected.
const maxCountAnswer = 64 << 10

// countDialect is the Messages dialect for the count: its requests are
// read by CountRequest, its answers are already Anthropic's, and its
// errors are translated as the Messages API's are.
var countDialect = func() *dialect {
	d := *messagesDialect
	d.request = func(body []byte) ([]byte, bool, string, error) {
		chat, model, err := anthropic.CountRequest(body)
		return chat, false, model, err
	}
	d.response = func(b []byte) ([]byte, error) { return b, nil }
	return &d
}()

// readCount is the stage, after identify, that reads a count request,
// translates it and records what the later stages read: the neutral body,
// the model and the prompt estimate. Nothing is generated, so no
// completion is reserved.
func readCount() Stage {
	return StageFunc(func(w http.ResponseWriter, r *http.Request, next http.Handler) error {
		ex := scope.Get(r.Context())
		raw, err := httpx.ReadLimited(r, int64(ex.Agent.MaxRequestSize))
		if err != nil {
			return err
		}
		chat, _, model, err := countDialect.request(raw)
		if err != nil {
			return apierror.BadRequest("", "%s", err.Error())
		}
		req, err := DecodeRequest(KindChat, chat)
		if err != nil {
			return err // the translation's own output: not expected
		}
		ex.Dialect, ex.Model, ex.Body = DialectMessages, model, chat
		ex.PayloadSHA256 = sha256Hex(raw)
		ex.Messages = len(req.Messages)
		ex.TokenEstimate = EstimateTokens(KindChat, req)
		ex.NoCompletion = true
		next.ServeHTTP(w, r)
		return nil
	})
}

// rateStage spends one request of the agent's rate_limit.
func (l *Limits) rateStage(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	if err := l.allowRequest(w, r); err != nil {
		return err
	}
	next.ServeHTTP(w, r)
	return nil
}

// CountTokens is the endpoint of the count chain: the count of an
// anthropic upstream serving the model (its candidates of that type, in
// order, failing over as a message would), else the estimate.
func (f *Forwarder) CountTokens(w http.ResponseWriter, r *http.Request) error {
	ex := scope.Get(r.Context())
	c := &call{f: f, ex: ex, kind: KindChat, j: journalOf(r, f.Audit)}
	ups := slices.DeleteFunc(slices.Clone(ex.Candidates), func(u *upstream.Upstream) bool { return u.Type != "anthropic" })
	if len(ups) == 0 {
		// No provider of this model can count: the estimate, which no
		// upstream is asked for.
		ex.Route, ex.Upstream, ex.Candidates = nil, "", nil
		// Estimated on what a message would send: the prompt as the
		// stages left it (redacted, the protocol prompt added).
		req, err := DecodeRequest(KindChat, ex.Body)
		if err != nil {
			return err
		}
		ex.TokenEstimate = EstimateTokens(KindChat, req)
		c.j.begin(r.Context(), r)
		if err := c.j.requested(); err != nil {
			return err
		}
		return c.answerCount(r.Context(), w, r, int64(ex.TokenEstimate), CountEstimated)
	}
	ex.Route, ex.Upstream, ex.Candidates = ups[0], ups[0].Name, ups
	ctx, cancel := c.start(r)
	defer cancel(nil)
	defer c.stopTimer()
	sent := time.Now()
	resp, err := send(ctx, r.Header, ex, countPath, ex.Body)
	if err != nil {
		return c.fail(ctx, w, r, err)
	}
	ex.UpstreamTime = time.Since(sent)
	if resp.StatusCode != http.StatusOK {
		// The provider's refusal (in OpenAI's shape, from the transport):
		// checked and passed on as any answer; the edge says it in
		// Anthropic's.
		return c.whole(ctx, w, r, resp)
	}
	raw, err := c.readJSON(resp, maxCountAnswer)
	if err != nil {
		return c.fail(ctx, w, r, err)
	}
	n, err := anthropic.CountResponse(raw)
	if err != nil {
		return c.fail(ctx, w, r, c.unknownShape(err.Error()))
	}
	return c.answerCount(ctx, w, r, n.InputTokens, CountFromUpstream)
}

// answerCount records the count's llm.response entry, then answers it.
func (c *call) answerCount(ctx context.Context, w http.ResponseWriter, r *http.Request, n int64, source string) error {
	out, err := json.Marshal(anthropic.TokenCount{InputTokens: n})
	if err != nil {
		return fmt.Errorf("encoding the token count: %w", err)
	}
	if err := c.j.respond(ctx, http.StatusOK, sha256Hex(out)); err != nil {
		httpx.Fail(w, r, err)
		return nil
	}
	w.Header().Set(CountSourceHeader, source)
	httpx.WriteRawJSON(w, http.StatusOK, out)
	return nil
}
