package app

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/testkit"
)

// repoRego is the repository's policies as bundle files (path → Rego).
func repoRego(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir("../rego", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".rego") || strings.HasSuffix(p, "_test.rego") {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel("../rego", p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A gateway configured with policy.bundle serves the signed bundle's
// policies; a newer bundle that does not verify is refused, chats are still
// decided by the last good one, and /readyz, the operator page and the
// audit trail each say so.
func TestPolicyBundleServes(t *testing.T) {
	good, other := testkit.NewBundleSigner(t), testkit.NewBundleSigner(t)
	srv := testkit.NewBundleServer(t, good.Build(t, "2026.11.1", repoRego(t), nil))
	g := newA2A(t, a2aOpts{policyYAML: "policy:\n  bundle:\n    url: " + srv.URL + "/gateway.tar.gz\n    public_key_file: " + good.PublicKeyFile +
		"\n    ca_file: " + srv.CAFile + "\n"})
	chat := func() int {
		st, _, _ := g.do(http.MethodPost, "/v1/chat/completions", "tok-orch_1", `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`)
		return st
	}
	if st := chat(); st != http.StatusOK {
		t.Fatalf("chat under the bundle: %d", st)
	}
	if st := g.app.policies.Bundle(); st.Revision != "2026.11.1" {
		t.Fatalf("bundle = %+v", st)
	}

	denyAll := map[string]string{"gateway/chat/chat.rego": "package gateway.chat\n\ndeny contains \"everything\" if true\n"}
	srv.Serve(other.Build(t, "evil", denyAll, nil))
	if err := g.app.policies.PollBundle(context.Background()); err == nil {
		t.Fatal("a bundle signed with another key was loaded")
	}
	if st := chat(); st != http.StatusOK {
		t.Fatalf("after a refused bundle the chat is %d: the last good bundle must decide", st)
	}
	_, body, _ := g.do(http.MethodGet, "/readyz", "", "")
	if !strings.Contains(string(body), `"status":"ready"`) || !strings.Contains(string(body), "policy bundle refused") {
		t.Fatalf("readyz: %s", body)
	}

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	res, err := c.PostForm(g.srv.URL+"/review/login", url.Values{"token": {"tok-admin"}, "next": {"/review/ops"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	page := string(b)
	for _, want := range []string{"revision <code>2026.11.1</code> from <code>" + srv.URL + "/gateway.tar.gz</code>",
		`id="bundle-error">the newest bundle was refused, revision 2026.11.1 still decides`, "verify"} {
		if !strings.Contains(page, want) {
			t.Errorf("operator page lacks %q", want)
		}
	}
	refused := false
	for _, e := range g.entries("policy.reload") {
		s := string(e.Summary)
		refused = refused || strings.Contains(s, `"ok":false`) && strings.Contains(s, `"bundle_revision":"2026.11.1"`)
	}
	if !refused {
		t.Error("no policy.reload entry with ok:false naming the serving bundle")
	}
}
