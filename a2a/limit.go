package a2a

import (
	"errors"
	"io"
	"net/http"
)

// maxAnswer bounds what the gateway reads of one answer of an agent (a
// JSON-RPC answer, or a whole stream): more is an error, never cut.
const maxAnswer = 32 << 20

// errTooLarge is an agent's answer over maxAnswer.
var errTooLarge = errors.New("the agent's answer is larger than the gateway reads")

// bounded is a RoundTripper whose responses' bodies end in an error past
// maxAnswer bytes: the SDK's client reads an answer whole, so an agent
// must not be able to make the gateway hold what it likes.
type bounded struct{ next http.RoundTripper }

func (b bounded) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &capped{rc: resp.Body, left: maxAnswer}
	return resp, nil
}

// capped reads at most left bytes of rc, then fails.
type capped struct {
	rc   io.ReadCloser
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *capped) Close() error { return c.rc.Close() }

// boundedClient is c with its answers bounded.
func boundedClient(c *http.Client) *http.Client {
	out := *c
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	out.Transport = bounded{next: next}
	return &out
}
