package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPolicyBundleSettings: policy.bundle is read strictly, each problem
// with its file and line, defaults filled in, paths resolved against the
// config directory, and the token taken from the environment.
func TestPolicyBundleSettings(t *testing.T) {
	gw := okGateway + "policy:\n  bundle:\n    url: https://bundles.example.com/gateway.tar.gz\n    public_key_file: keys/bundle.pem\n    token: ${BUNDLE_TOKEN}\n"
	cfg, err := loadFiles(t, gw, okAgents, okProtocol, map[string]string{"BUNDLE_TOKEN": "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.Gateway.Policy.Bundle
	if b == nil || b.Token != "s3cret" || b.Polling != time.Minute || b.KeyID != "default" || b.Algorithm != "RS256" ||
		!filepath.IsAbs(b.PublicKeyFile) || !strings.HasSuffix(b.PublicKeyFile, filepath.Join("keys", "bundle.pem")) {
		t.Fatalf("bundle = %+v", b)
	}

	cases := []struct{ note, block, want string }{
		{"neither source", "    public_key_file: k.pem\n", "gateway.yaml:6: policy.bundle: set url"},
		{"both sources", "    url: https://b.example.com/b.tar.gz\n    oci: ghcr.io/acme/p:1\n    public_key_file: k.pem\n", "gateway.yaml:8: policy.bundle.oci: set url or oci, not both"},
		{"not a URL", "    url: ftp://b.example.com/b.tar.gz\n    public_key_file: k.pem\n", "gateway.yaml:7: policy.bundle.url: want an http(s) URL"},
		{"token over http", "    url: http://b.example.com/b.tar.gz\n    token: t\n    public_key_file: k.pem\n", "gateway.yaml:8: policy.bundle.token: a token is sent only over https"},
		{"bad reference", "    oci: \"ghcr.io/Acme/p:1\"\n    public_key_file: k.pem\n", "gateway.yaml:7: policy.bundle.oci: want a reference"},
		{"no key", "    oci: ghcr.io/acme/p:1\n", "gateway.yaml:6: policy.bundle.public_key_file: required"},
		{"too eager", "    oci: ghcr.io/acme/p:1\n    public_key_file: k.pem\n    polling: 10ms\n", "gateway.yaml:9: policy.bundle.polling: want at least 1s"},
		{"unknown algorithm", "    oci: ghcr.io/acme/p:1\n    public_key_file: k.pem\n    algorithm: RS999\n", "gateway.yaml:9: policy.bundle.algorithm: \"RS999\" is not"},
		{"misspelt key", "    oci: ghcr.io/acme/p:1\n    public_key_file: k.pem\n    keyid: x\n", "gateway.yaml:9: unknown key \"keyid\" in policy.bundle (did you mean \"key_id\"?)"},
		{"duration as a number", "    oci: ghcr.io/acme/p:1\n    public_key_file: k.pem\n    polling: 60\n", "gateway.yaml:9:"},
	}
	for _, c := range cases {
		_, err := loadFiles(t, okGateway+"policy:\n  bundle:\n"+c.block, okAgents, okProtocol, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.note, err, c.want)
		}
	}
	_, err = loadFiles(t, okGateway+"policy:\n  dir: rego\n  bundle:\n    oci: ghcr.io/acme/p:1\n    public_key_file: k.pem\n", okAgents, okProtocol, nil)
	if err == nil || !strings.Contains(err.Error(), "gateway.yaml:6: policy.dir and policy.bundle: set one") {
		t.Errorf("dir and bundle: err = %v", err)
	}
}
