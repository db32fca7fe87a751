package messaging

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testcert"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/mailbox"
	"github.com/sacpgw/gateway/messaging/relayconf"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/redact"
)

// TestNewRequiresDeps: the service refuses to start without any of its
// required dependencies, and with a redaction it cannot build.
func TestNewRequiresDeps(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	cfg, reg := h.cfg, h.reg
	rbac, err := policy.RBACFor(cfg.Dir, cfg.Agents, cfg.Gateway.Admin.ReviewerNames())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	full := func() Deps {
		return Deps{Config: cfg, Registry: reg, RBAC: rbac, Policy: policies(t), Queue: mailbox.NewMemoryQueue(0),
			History: mailbox.NewMemoryHistory(mailbox.HistoryOptions{}), Audit: &door.Recorder{Log: &testkit.Trail{}, Logger: log},
			Escalator: &escalator{}, Log: log}
	}
	for _, tc := range []struct {
		name   string
		change func(*Deps)
	}{
		{"config", func(d *Deps) { d.Config = nil }},
		{"registry", func(d *Deps) { d.Registry = nil }},
		{"rbac", func(d *Deps) { d.RBAC = nil }},
		{"policy", func(d *Deps) { d.Policy = nil }},
		{"queue", func(d *Deps) { d.Queue = nil }},
		{"history", func(d *Deps) { d.History = nil }},
		{"audit", func(d *Deps) { d.Audit = nil }},
		{"escalator", func(d *Deps) { d.Escalator = nil }},
		{"log", func(d *Deps) { d.Log = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := full()
			tc.change(&d)
			if s, err := New(d); err == nil || s != nil || !strings.Contains(err.Error(), "are required") {
				t.Errorf("New without %s: %v %v", tc.name, s, err)
			}
		})
	}
	bad := *cfg
	bad.Protocol.Redaction = redact.Config{Messages: true, Detectors: []string{"no_such_detector"}}
	d := full()
	d.Config = &bad
	if _, err := New(d); err == nil || !strings.Contains(err.Error(), "redaction") {
		t.Errorf("bad redaction: %v", err)
	}
	// Without a client of its own the service dials public addresses only:
	// a loopback endpoint is refused.
	d = full()
	s, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	_, n, err := s.handOver(context.Background(), "http://127.0.0.1:1/messages", "orch", "", []byte("{}"), time.Second)
	if n != 1 || failureKind(err) != "destination_not_allowed" {
		t.Errorf("default client: %d attempts, %v", n, err)
	}
}

// withAgents returns a copy of cfg whose agent id is changed by f.
func withAgents(cfg *config.Config, id string, f func(*roster.Agent)) *config.Config {
	c := *cfg
	c.Agents = make(map[string]*roster.Agent, len(cfg.Agents))
	for k, a := range cfg.Agents {
		c.Agents[k] = a
	}
	a := *cfg.Agents[id]
	f(&a)
	c.Agents[id] = &a
	return &c
}

// TestPrepareReload: a configuration reload changes the message rules and
// the redaction from the next message on, and only once applied; a
// configuration that cannot be built is refused and the old one serves.
func TestPrepareReload(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	event := `{"message_type":"notification","sender_id":"planner","receiver_id":"orch","workflow_id":"wf_rl","action":"replan","payload":{"email":"bob@example.com"}}`
	decodeError(t, h.send("planner", event), http.StatusForbidden, "policy_denied")

	next := writeConfig(t, t.TempDir(), h.peers, harnessOpts{protocolExtra: "  redaction:\n    messages: true\n"})
	next = withAgents(next, "planner", func(a *roster.Agent) {
		a.Messages = append(a.Messages, roster.MessageRule{To: []string{"orch"}, Actions: []string{"replan"}})
	})
	apply, err := h.svc.Prepare(next)
	if err != nil {
		t.Fatal(err)
	}
	decodeError(t, h.send("planner", event), http.StatusForbidden, "policy_denied") // not applied yet
	apply()
	h.run()
	if w := h.send("planner", event); w.Code != http.StatusAccepted {
		t.Fatalf("after the reload: %d %s", w.Code, w.Body)
	}
	if got := string(h.peers["orch"].WaitFor(1)[0].Body); strings.Contains(got, "bob@example.com") {
		t.Errorf("redaction not applied after the reload: %s", got)
	}

	bad := *next
	bad.Protocol.Redaction = redact.Config{Messages: true, Detectors: []string{"no_such_detector"}}
	if _, err := h.svc.Prepare(&bad); err == nil {
		t.Fatal("a redaction that cannot be built was prepared")
	}
	if w := h.send("planner", strings.Replace(event, "wf_rl", "wf_rl2", 1)); w.Code != http.StatusAccepted {
		t.Errorf("the last good configuration no longer serves: %d %s", w.Code, w.Body)
	}
}

// TestNewClientTLS: the client verifies endpoints against ca_file and
// presents the gateway's certificate, re-read for each new connection so
// a rotated certificate needs no restart; files that cannot be used are
// refused at startup.
func TestNewClientTLS(t *testing.T) {
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	put := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	srvCert, srvKey := ca.Issue(t, 10, "")
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.TLS.PeerCertificates[0].URIs[0].String())
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	loopback := egress.Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

	caFile := put("ca.pem", ca.PEM)
	c1, k1 := ca.Issue(t, 11, "spiffe://example.org/gateway-1")
	certFile, keyFile := put("gw.pem", c1), put("gw.key", k1)
	client, err := NewClient(relayconf.TLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}, loopback)
	if err != nil {
		t.Fatal(err)
	}
	post := func(c *http.Client) error {
		resp, err := c.Post(srv.URL, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := post(client); err != nil {
		t.Fatalf("over mTLS: %v", err)
	}
	c2, k2 := ca.Issue(t, 12, "spiffe://example.org/gateway-2")
	put("gw.pem", c2)
	put("gw.key", k2)
	client.CloseIdleConnections()
	if err := post(client); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	mu.Lock()
	if strings.Join(seen, " ") != "spiffe://example.org/gateway-1 spiffe://example.org/gateway-2" {
		t.Errorf("the endpoint saw %v", seen)
	}
	mu.Unlock()
	// A certificate that became unreadable fails the handshake.
	put("gw.key", []byte("garbage"))
	client.CloseIdleConnections()
	if err := post(client); err == nil {
		t.Error("a handshake succeeded with an unreadable client certificate")
	}
	// Without the gateway's certificate the endpoint refuses the handshake;
	// without the CA the gateway refuses the endpoint.
	bare, err := NewClient(relayconf.TLS{CAFile: caFile}, loopback)
	if err != nil {
		t.Fatal(err)
	}
	if err := post(bare); err == nil {
		t.Error("mTLS endpoint reached without a client certificate")
	}
	put("gw.key", k2)
	system, err := NewClient(relayconf.TLS{CertFile: certFile, KeyFile: keyFile}, loopback)
	if err != nil {
		t.Fatal(err)
	}
	if err := post(system); err == nil {
		t.Error("an endpoint certificate signed by an unknown CA was accepted")
	}

	for _, tc := range []struct {
		name string
		tls  relayconf.TLS
		want string
	}{
		{"missing CA file", relayconf.TLS{CAFile: filepath.Join(dir, "none.pem")}, "messaging.tls.ca_file"},
		{"CA file without certificates", relayconf.TLS{CAFile: put("empty.pem", []byte("nothing"))}, "no PEM certificates"},
		{"key that does not match", relayconf.TLS{CertFile: certFile, KeyFile: put("other.key", k1)}, "client certificate"},
		{"missing certificate", relayconf.TLS{CertFile: filepath.Join(dir, "none.pem"), KeyFile: keyFile}, "client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewClient(tc.tls, loopback); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
