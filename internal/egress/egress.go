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
	"strconv"
	"strings"
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

// Check reports whether addr may be dialed. A zoned address is refused:
// it names an interface, which no listed network contains, so the ranges
// below would not see it.
func (p Policy) Check(addr netip.Addr) error {
	if addr.Zone() != "" {
		return fmt.Errorf("%w: %s names an interface (a zoned address)", ErrDestination, addr)
	}
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

// CheckURLHost refuses a URL host (with or without its port) that is a
// literal address outside policy, for an early, clear answer; names are
// checked when dialed. A literal counts in every form a resolver or a URL
// parser reads as an address, not only the canonical one (see hostAddr).
func (p Policy) CheckURLHost(host string) error {
	addr, isAddr, err := hostAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDestination, err)
	}
	if !isAddr {
		return nil // a name: checked at dial time
	}
	return p.Check(addr)
}

// hostAddr reads host as the address it names, if it is one. IPv6 is the
// bracketed literal (with its zone, which Check refuses). IPv4 is read as
// inet_aton (what getaddrinfo applies to a name) and the URL standard do:
// one to four parts, each decimal, 0x-hex or 0-octal, the last filling the
// remaining bytes, so 127.1, 2130706433, 0x7f000001 and 0177.0.0.1 are all
// 127.0.0.1; a trailing dot changes nothing. A host whose last label is a
// number is an address or invalid, never a name to resolve.
func hostAddr(host string) (addr netip.Addr, isAddr bool, err error) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return netip.Addr{}, false, fmt.Errorf("%q is not a valid IPv6 address", host)
		}
		return a, true, nil
	}
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	if !numericPart(labels[len(labels)-1]) {
		return netip.Addr{}, false, nil
	}
	a, ok := legacyIPv4(labels)
	if !ok {
		return netip.Addr{}, false, fmt.Errorf("%q is neither a name nor a valid IPv4 address", host)
	}
	return a, true, nil
}

// numericPart reports whether a label is a number as the URL standard's
// "ends in a number" sees it: decimal digits, or 0x followed by hex digits.
func numericPart(s string) bool {
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		_, err := strconv.ParseUint("0"+s[2:], 16, 64)
		return err == nil || errors.Is(err, strconv.ErrRange)
	}
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// legacyIPv4 reads inet_aton's forms of an IPv4 address: every part but
// the last is one byte, the last fills the bytes that remain.
func legacyIPv4(parts []string) (netip.Addr, bool) {
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, s := range parts[:len(parts)-1] {
		n, ok := ipv4Part(s)
		if !ok || n > 0xff {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last, ok := ipv4Part(parts[len(parts)-1])
	if !ok || last >= 1<<(8*(5-len(parts))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// ipv4Part reads one part: 0x-hex (0x alone is 0), 0-octal, or decimal.
func ipv4Part(s string) (uint64, bool) {
	base := 10
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		s, base = "0"+s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, base, 64)
	return n, err == nil
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
