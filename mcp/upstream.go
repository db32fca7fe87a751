package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// maxMessage bounds one message from a server (a JSON answer, an event's
// data): larger is refused, never cut.
const maxMessage = 16 << 20

// hop is what a request to a server carries besides its body: the server's
// session and the protocol version, and the gateway's request id.
type hop struct {
	session, protocol, requestID string
}

// errSessionGone is a server's 404 to a request with its session id: the
// session ended there, and the agent must initialize again.
var errSessionGone = errors.New("the MCP server ended the session")

// statusError is a server's answer of an unexpected HTTP status.
type statusError struct{ status int }

func (e *statusError) Error() string { return "answered HTTP " + strconv.Itoa(e.status) }

// send makes one request to srv: the configured headers (the gateway's
// credentials), the server's oauth token, the transport's headers, and
// nothing of the agent's. A 401 to a token drops it and the request is
// sent once more with a new one. The error never holds a header; a
// url.Error is unwrapped so that the URL (whose query may hold a key)
// stays out of messages and logs.
func (d *Door) send(ctx context.Context, srv *server, method string, h hop, body []byte, accept string) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		auth := ""
		if srv.cred != nil {
			var err error
			if auth, err = srv.cred.authorization(ctx); err != nil {
				if _, own := srv.cred.(*clientCreds); own {
					// The gateway's own token is the server's health;
					// a person who has not connected is not.
					d.health.failed(srv.name, err)
				}
				return nil, err
			}
		}
		resp, err := d.sendOnce(ctx, srv, method, h, body, accept, auth)
		if err != nil || resp.StatusCode != http.StatusUnauthorized || auth == "" || attempt > 0 {
			return resp, err
		}
		drain(resp)
		srv.cred.rejected(ctx, auth)
	}
}

// sendOnce is one request of send, with auth as its Authorization (empty:
// none).
func (d *Door) sendOnce(ctx context.Context, srv *server, method string, h hop, body []byte, accept, auth string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, srv.url, rd)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	for k, v := range srv.header {
		req.Header[k] = v
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "sacp-gateway")
	if h.session != "" {
		req.Header.Set(hdrSession, h.session)
	}
	if h.protocol != "" {
		req.Header.Set(hdrProtocol, h.protocol)
	}
	if h.requestID != "" {
		req.Header.Set("X-Request-Id", h.requestID)
	}
	client := d.client
	if srv.stdio != nil {
		client = srv.stdio.client
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", srv.timeout)
		}
		d.health.failed(srv.name, err)
		return nil, err
	}
	d.metrics.upstreamTime(srv.name, time.Since(start))
	if resp.StatusCode >= 500 {
		d.health.failed(srv.name, &statusError{resp.StatusCode})
	} else {
		d.health.ok(srv.name)
	}
	return resp, nil
}

// streams reports whether the answer is an event stream.
func streams(resp *http.Response) bool {
	return mediaType(resp.Header.Get("Content-Type"), "text/event-stream")
}

// readReply reads a server's 200 answer to a POST: one JSON document (a
// message or a batch) or an event stream of messages, each given to fn in
// order until fn says stop. Anything that is not a message the gateway
// knows ends the reading with an error: nothing unknown is passed on.
func readReply(resp *http.Response, fn func(m *message) (stop bool, err error)) error {
	switch {
	case mediaType(resp.Header.Get("Content-Type"), "application/json"):
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxMessage+1))
		if err != nil {
			return fmt.Errorf("reading the answer: %w", err)
		}
		if len(body) > maxMessage {
			return fmt.Errorf("an answer larger than %d bytes", maxMessage)
		}
		msgs, _, err := readMessages(body)
		if err != nil {
			return fmt.Errorf("an answer that is not JSON-RPC: %w", err)
		}
		for _, m := range msgs {
			if stop, err := fn(m); stop || err != nil {
				return err
			}
		}
		return nil
	case streams(resp):
		return readEvents(resp.Body, maxMessage, func(ev event) (bool, error) {
			if len(ev.data) == 0 || (ev.name != "" && ev.name != "message") {
				return false, nil // a priming event or one of another type
			}
			msgs, _, err := readMessages(ev.data)
			if err != nil {
				return true, fmt.Errorf("an event that is not JSON-RPC: %w", err)
			}
			for _, m := range msgs {
				if stop, err := fn(m); stop || err != nil {
					return true, err
				}
			}
			return false, nil
		})
	}
	return fmt.Errorf("an answer of media type %q", resp.Header.Get("Content-Type"))
}

// sameID reports whether two ids are the same value.
func sameID(a, b jsontext.Value) bool { return bytes.Equal(compact(a), compact(b)) }

// validSessionID: a server's session id is visible ASCII (the transport's
// rule), bounded.
func validSessionID(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// drain discards what is left of a body (bounded) so the connection can be
// reused, then closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}
