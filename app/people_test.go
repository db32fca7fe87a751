package app

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testoidc"
)

// A gateway built from its files signs a person in with the
// organisation's provider: people.oidc with its secret from the
// environment, the provider reached through the outbound guard, which
// lets a loopback provider through only when messaging.allowed_networks
// lists it.
func TestPeopleSignInThroughTheGateway(t *testing.T) {
	op := testoidc.Start(t, testoidc.Options{Users: []testoidc.User{{Subject: "u-ada", Email: "ada@example.org", Groups: []string{"gw-admins"}}}})
	t.Setenv("OIDC_SECRET", op.ClientSecret)
	for _, tc := range []struct {
		note, networks string
		want           int
	}{
		{"provider allowed", "[127.0.0.0/8]", http.StatusOK},
		{"provider on a blocked address", "[]", http.StatusBadGateway},
	} {
		t.Run(tc.note, func(t *testing.T) {
			dir := t.TempDir()
			_, a, auditLog := buildFromFiles(t, dir, map[string]string{
				config.GatewayFile: `listen: "127.0.0.1:0"
admin:
  token_sha256: "` + roster.HashTokenHex("tok-admin") + `"
upstreams:
  - {name: mock, type: mock, models: ["*"]}
audit:
  dir: ` + filepath.Join(dir, "audit") + `
  chain: people
messaging:
  allowed_networks: ` + tc.networks + `
` + peopleYAML(op, "admins: [gw-admins]"),
				config.AgentsFile:   "agents:\n  coder:\n    token_sha256: \"" + roster.HashTokenHex("tok-coder") + "\"\n",
				config.ProtocolFile: "protocol: {}\n",
			})
			srv := httptest.NewServer(a.Handler())
			t.Cleanup(func() {
				srv.Close()
				a.Close()
				_ = auditLog.Close()
			})
			op.AllowRedirect(srv.URL+"/review/oidc/callback", "")
			op.SignInAs("u-ada")
			jar, _ := cookiejar.New(nil)
			res, err := (&http.Client{Jar: jar}).Get(srv.URL + "/review/oidc/login?next=/review/queue")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.StatusCode != tc.want {
				t.Fatalf("sign-in: %d at %s\n%s", res.StatusCode, res.Request.URL, body)
			}
			if tc.want == http.StatusOK && (res.Request.URL.Path != "/review/queue" || !strings.Contains(string(body), "ada@example.org</b> (admin)")) {
				t.Fatalf("signed in to %s:\n%s", res.Request.URL, body)
			}
		})
	}
}
