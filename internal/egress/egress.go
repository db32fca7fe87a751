// Package egress keeps the gateway's own outbound calls (agents'
// endpoints, webhooks, spawned agents) on addresses that policy allows. The
// check runs on the address actually dialed, after name resolution, so a
// name that resolves to a private address, or that changes its answer
// between a check and the call (DNS rebinding), is refused all the same.
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrDestination is a dial to an address outside policy.
var ErrDestination = errors.New("destination not allowed")

// blocked are the ranges no outbound call reaches unless allowed
// explicitly: loopback, private, link-local (cloud metadata lives at
// 169.254.169.254), shared (CGNAT), benchmarking, reserved, multicast, the
// unspecified address, and the IPv6 forms of these (unique local, NAT64).
var blocked = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
		"224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001:db8::/32", "fc00::/7", "fe80::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Policy says which addresses outbound calls may reach.
type Policy struct {
	// Allowed ranges are reachable although blocked (messaging.allowed_networks).
	Allowed []netip.Prefix
}

// Check reports whether addr may be dialed.
func (p Policy) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	for _, a := range p.Allowed {
		if a.Contains(addr) {
			return nil
		}
	}
	if !addr.IsValid() {
		return ErrDestination
	}
	for _, b := range blocked {
		if b.Contains(addr) {
			return fmt.Errorf("%w: %s is in %s (list it in messaging.allowed_networks to allow it)", ErrDestination, addr, b)
		}
	}
	return nil
}

// CheckURLHost refuses a URL host that is a literal address outside
// policy, for an early, clear answer; names are checked when dialed.
func (p Policy) CheckURLHost(host string) error {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return nil // a name: checked at dial time
	}
	return p.Check(addr)
}

// control is net.Dialer.Control: it sees the resolved address of each
// connection attempt, just before the connect.
func (p Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrDestination, address)
	}
	return p.Check(ap.Addr())
}

// Dialer returns a dialer that refuses addresses outside policy.
func (p Policy) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: p.control}
}

// Guard makes t dial only where policy allows, never through a proxy from
// the environment (which would dial for it, unchecked).
func (p Policy) Guard(t *http.Transport) *http.Transport {
	t.Proxy = nil
	t.DialContext = p.Dialer(10 * time.Second).DialContext
	return t
}

// NoRedirects is an http.Client CheckRedirect that follows none: a 3xx
// cannot send the gateway (and what it carries) somewhere else.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Client is a client for webhooks: policy-checked dials, no redirects, a
// whole-call timeout.
func (p Policy) Client(timeout time.Duration) *http.Client {
	t := p.Guard(http.DefaultTransport.(*http.Transport).Clone())
	return &http.Client{Transport: t, Timeout: timeout, CheckRedirect: NoRedirects}
}
