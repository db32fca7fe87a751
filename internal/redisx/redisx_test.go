package redisx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Each kind of Settings builds its go-redis client: one node, a failover
// client following the Sentinels, a cluster client.
func TestNewClientKinds(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{URL: "redis://127.0.0.1:1/0"}, "*redis.Client"},
		{Settings{Sentinel: &Sentinel{Master: "m", Addrs: []string{"127.0.0.1:1"}}}, "*redis.Client"},
		{Settings{Cluster: &Cluster{Addrs: []string{"127.0.0.1:1"}}}, "*redis.ClusterClient"},
	} {
		if ps := tc.s.Check(); len(ps) != 0 {
			t.Fatalf("%+v: %v", tc.s, ps)
		}
		c, err := NewClient(tc.s, Timeouts{})
		if err != nil {
			t.Fatal(err)
		}
		got := "*redis.Client"
		if _, ok := c.(*redis.ClusterClient); ok {
			got = "*redis.ClusterClient"
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.s.Kind(), got, tc.want)
		}
		_ = c.Close()
	}
}

// A CA file that is not PEM is refused at startup, not at the first call;
// the error names the setting.
func TestNewClientBadCA(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := NewClient(Settings{Cluster: &Cluster{Addrs: []string{"r:6379"}}, TLS: &TLS{CAFile: ca}}, Timeouts{})
	if err == nil || !strings.Contains(err.Error(), "state.redis.tls.ca_file") {
		t.Fatalf("err %v", err)
	}
}

// A URL's password never appears in a problem.
func TestCheckKeepsURLPasswordOut(t *testing.T) {
	s := Settings{URL: "redis://:pw-secret@r:6379/0", Password: "x"}
	for _, p := range s.Check() {
		if strings.Contains(p.Msg, "pw-secret") {
			t.Errorf("problem shows the password: %s", p.Msg)
		}
	}
	s = Settings{URL: "redis://:pw-secret@r:bad port/0"}
	ps := s.Check()
	if len(ps) == 0 {
		t.Fatal("no problem for a bad URL")
	}
	for _, p := range ps {
		if strings.Contains(p.Msg, "pw-secret") {
			t.Errorf("problem shows the password: %s", p.Msg)
		}
	}
}
