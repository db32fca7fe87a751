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
