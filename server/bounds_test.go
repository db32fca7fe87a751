package server

import (
	"context"
	"net"
	"net/http"
	"testing"
)

// pipeConn is a net.Conn with a chosen peer address.
type pipeConn struct {
	net.Conn
	addr   net.Addr
	closed bool
}

func (c *pipeConn) RemoteAddr() net.Addr { return c.addr }
func (c *pipeConn) Close() error         { c.closed = true; return nil }

func conn(ip string) *pipeConn {
	a, _ := net.Pipe()
	return &pipeConn{Conn: a, addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 1234}}
}

// Connections that have not authenticated are capped per source; one that
// authenticates leaves the count, and closing frees the place.
func TestConnTrackerCapsUnauthenticatedPerSource(t *testing.T) {
	tr := newConnTracker(2)
	open := func(ip string) (*pipeConn, context.Context) {
		c := conn(ip)
		ctx := tr.context(context.Background(), c)
		tr.state(c, http.StateNew)
		return c, ctx
	}
	a, actx := open("10.0.0.1")
	b, _ := open("10.0.0.1")
	c, _ := open("10.0.0.1")
	if a.closed || b.closed || !c.closed {
		t.Fatalf("closed: %v %v %v, want only the third", a.closed, b.closed, c.closed)
	}
	tr.state(c, http.StateClosed)
	if other, _ := open("10.0.0.2"); other.closed {
		t.Fatal("another source was capped")
	}
	tr.authenticated(actx)
	if d, _ := open("10.0.0.1"); d.closed {
		t.Fatal("an authenticated connection still counts")
	}
	tr.state(b, http.StateClosed)
	if e, _ := open("10.0.0.1"); e.closed {
		t.Fatal("a closed connection still counts")
	}
	if f, _ := open("10.0.0.1"); !f.closed {
		t.Fatal("the cap no longer holds")
	}
}
