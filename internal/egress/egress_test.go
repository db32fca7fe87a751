package egress

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	p := Policy{}
	for _, tc := range []struct {
		addr    string
		allowed bool
	}{
		{"127.0.0.1", false}, {"127.9.9.9", false}, {"::1", false}, {"0.0.0.0", false}, {"::", false},
		{"169.254.169.254", false}, {"fe80::1", false}, {"10.1.2.3", false}, {"172.20.0.1", false}, {"192.168.1.1", false},
		{"100.64.0.1", false}, {"fd00::1", false}, {"::ffff:127.0.0.1", false}, {"::ffff:169.254.169.254", false},
		{"224.0.0.1", false}, {"255.255.255.255", false}, {"64:ff9b::a9fe:a9fe", false},
		{"93.184.216.34", true}, {"2606:4700::1111", true}, {"8.8.8.8", true},
	} {
		err := p.Check(netip.MustParseAddr(tc.addr))
		if (err == nil) != tc.allowed {
			t.Errorf("%s: allowed=%v, err %v", tc.addr, err == nil, err)
		}
		if err != nil && !errors.Is(err, ErrDestination) {
			t.Errorf("%s: error is not ErrDestination: %v", tc.addr, err)
		}
	}
	lan := Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	if lan.Check(netip.MustParseAddr("10.1.2.3")) != nil || lan.Check(netip.MustParseAddr("127.0.0.1")) == nil {
		t.Error("allowed_networks admits its range only")
	}
}

// The check runs on the dialed address: a name that resolves to loopback
// ("localhost") is refused as surely as the literal, and the server gets
// nothing; a redirect is not followed.
func TestClientDialsOnlyAllowedAddresses(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	_, port, _ := splitHostPort(srv.URL)
	c := Policy{}.Client(2 * time.Second)
	for _, u := range []string{srv.URL, "http://localhost:" + port} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, u, nil)
		if _, err := c.Do(req); !errors.Is(err, ErrDestination) {
			t.Errorf("%s: %v", u, err)
		}
	}
	if hits != 0 {
		t.Fatalf("the loopback server was reached %d times", hits)
	}
	open := Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}.Client(2 * time.Second)
	resp, err := open.Get(srv.URL)
	if err != nil || hits != 1 {
		t.Fatalf("an allowed network was refused: %v", err)
	}
	resp.Body.Close()
	redirect := httptest.NewServer(http.RedirectHandler(srv.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	resp, err = open.Get(redirect.URL)
	if err != nil || resp.StatusCode != http.StatusTemporaryRedirect || hits != 1 {
		t.Fatalf("redirect followed: %v %v hits %d", err, resp, hits)
	}
	resp.Body.Close()
}

func splitHostPort(u string) (string, string, error) {
	ap, err := netip.ParseAddrPort(u[len("http://"):])
	return ap.Addr().String(), strconv.Itoa(int(ap.Port())), err
}

// A literal address is refused in every form a dialer or a URL parser
// reads as that address (inet_aton's short, decimal, hex and octal forms;
// a trailing dot; brackets without a port), a numeric host that is no valid
// address is refused rather than sent to DNS, and a zoned IPv6 literal is
// refused outright: policy lists networks, not interfaces.
func TestCheckURLHost(t *testing.T) {
	p := Policy{}
	for _, host := range []string{
		"127.0.0.1", "127.0.0.1:8080", "127.1", "127.1:9000", "127.0.1", "2130706433", "2130706433:80",
		"0x7f000001", "0X7F000001:80", "0x7f.1", "0177.0.0.1", "0177.1", "017700000001", "127.0.0.1.", "127.1.:80",
		"0", "0x", "0.0.0.0", "169.254.43518", "2852039166", "0xa9.0xfe.0xa9.0xfe",
		"[::1]", "[::1]:80", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]:80",
		"[fe80::1%eth0]:8080", "[fe80::1%eth0]", "fe80::1%eth0", "[2606:4700::1111%eth0]:443",
		"1.2.3.999", "4294967296", "1.2.3.4.5", "example.123", "08.1.2.3", "1..2", "256.1",
	} {
		err := p.CheckURLHost(host)
		if !errors.Is(err, ErrDestination) {
			t.Errorf("%q: %v, want ErrDestination", host, err)
		}
	}
	for _, host := range []string{
		"example.com", "example.com:443", "8.8.8.8", "134744072", "0x8080808", "[2606:4700::1111]:443",
		"1.2.3.4.example.com", "v2.api.example", "0x.example", "123.example.org", "localhost.example",
	} {
		if err := p.CheckURLHost(host); err != nil {
			t.Errorf("%q: %v, want allowed", host, err)
		}
	}
	lan := Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	for _, host := range []string{"127.1", "2130706433", "0x7f000001:80"} {
		if err := lan.CheckURLHost(host); err != nil {
			t.Errorf("%q with 127.0.0.0/8 allowed: %v", host, err)
		}
	}
}

// The dial-time check refuses a zoned address too: no prefix contains one,
// so it would otherwise slip past the blocked ranges.
func TestCheckRefusesZonedAddresses(t *testing.T) {
	for _, p := range []Policy{{}, {Allowed: []netip.Prefix{netip.MustParsePrefix("fe80::/10")}}} {
		for _, a := range []string{"fe80::1%eth0", "2606:4700::1111%1"} {
			if err := p.Check(netip.MustParseAddr(a)); !errors.Is(err, ErrDestination) {
				t.Errorf("%s (allowed %v): %v, want ErrDestination", a, p.Allowed, err)
			}
		}
	}
}

// FuzzHostAddr: reading a host never panics, a canonical address reads as
// itself, and a host read as an address either has the IPv4 length or is an
// IPv6 literal.
func FuzzHostAddr(f *testing.F) {
	for _, s := range []string{"127.1", "0x7f000001", "[fe80::1%eth0]:80", "1.2.3.4.", "example.com", "0x", "..", "[", "]:", "4294967295"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		addr, isAddr, err := hostAddr(host)
		if canon, perr := netip.ParseAddr(host); perr == nil && canon.Is4() {
			if err != nil || !isAddr || addr != canon {
				t.Fatalf("%q read as %v, %v, %v; want %v", host, addr, isAddr, err, canon)
			}
		}
		if isAddr && !addr.IsValid() {
			t.Fatalf("%q: an invalid address reported as one", host)
		}
	})
}
