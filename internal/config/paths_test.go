package config

import (
	"os"
	"path/filepath"
	"testing"
)

// A relative path in a config file is relative to the directory of that
// file, whatever the working directory; an absolute path stays as it is.
func TestPathsAreRelativeToTheConfigDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc", "gateway")
	elsewhere := filepath.Join(root, "elsewhere")
	abs := filepath.Join(root, "abs")
	for _, d := range []string{dir, elsewhere, abs, filepath.Join(dir, "schemas"), filepath.Join(dir, "specs"), filepath.Join(abs, "specs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	touch := func(p, content string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"ca.pem", "key.pem", "cert.pem", "template.md", "signing.pem"} {
		touch(filepath.Join(dir, f), "x")
		touch(filepath.Join(abs, f), "x")
	}
	touch(filepath.Join(dir, "schemas", "s.json"), `{"type":"object"}`)
	touch(filepath.Join(abs, "s.json"), `{"type":"object"}`)

	tests := []struct {
		name string
		// prefix is what the config files write before each file name.
		prefix string
		// want is the directory the paths must resolve into.
		want string
	}{
		{"relative", "", dir},
		{"relative with ./", "./", dir},
		{"absolute", abs + "/", abs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gw := `upstreams:
  - {name: m, type: mock, models: ["*"], ca_file: ` + tc.prefix + `ca.pem}
tls: {cert_file: ` + tc.prefix + `cert.pem, key_file: ` + tc.prefix + `key.pem, client_ca_file: ` + tc.prefix + `ca.pem}
policy: {dir: ` + tc.prefix + `rego, shadow_dir: ` + tc.prefix + `shadow}
approval: {catalogue_dir: ` + tc.prefix + `specs}
audit: {dir: ` + tc.prefix + `audit, signing_key_file: ` + tc.prefix + `signing.pem}
messaging: {tls: {ca_file: ` + tc.prefix + `ca.pem, cert_file: ` + tc.prefix + `cert.pem, key_file: ` + tc.prefix + `key.pem}}
`
			schema := tc.prefix + "schemas/s.json"
			if tc.want == abs {
				schema = abs + "/s.json"
			}
			agents := "agents:\n  a1:\n    token_sha256: \"" + "61b89502ba471149636931e887f65a4f785d47e646b2c8521cfd02dbfed43722" + "\"\n    response_format: json_standard\n    data_schema_file: " + schema + "\n"
			pr := "protocol:\n  sacp:\n    template_file: " + tc.prefix + "template.md\n"
			touch(filepath.Join(dir, GatewayFile), gw)
			touch(filepath.Join(dir, AgentsFile), agents)
			touch(filepath.Join(dir, ProtocolFile), pr)
			// The process runs elsewhere: nothing may resolve against it.
			t.Chdir(elsewhere)
			cfg, err := Load(dir, Options{LookupEnv: noEnv})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			g := cfg.Gateway
			in := func(p, name string) {
				t.Helper()
				if want := filepath.Join(tc.want, name); p != want {
					t.Errorf("%s resolved to %q, want %q", name, p, want)
				}
			}
			in(g.Upstreams[0].CAFile, "ca.pem")
			in(g.TLS.CertFile, "cert.pem")
			in(g.TLS.KeyFile, "key.pem")
			in(g.TLS.ClientCAFile, "ca.pem")
			in(g.Policy.Dir, "rego")
			in(g.Policy.ShadowDir, "shadow")
			in(g.Approval.CatalogueDir, "specs")
			in(g.Audit.Dir, "audit")
			in(g.Audit.SigningKeyFile, "signing.pem")
			in(g.Messaging.TLS.CAFile, "ca.pem")
			in(g.Messaging.TLS.CertFile, "cert.pem")
			in(g.Messaging.TLS.KeyFile, "key.pem")
			in(cfg.Protocol.SACP.TemplateFile, "template.md")
			if a := cfg.Agents["a1"]; len(a.DataSchema) == 0 {
				t.Errorf("the data schema %s was not read", schema)
			}
			if g.Policy.DirDefaulted {
				t.Error("a configured policy dir is marked as the default")
			}
		})
	}
}

// Relative config dirs work too: the paths anchor to it as it was when
// the config was loaded.
func TestPathsFromARelativeConfigDir(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "config"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{GatewayFile: okGateway + "policy: {dir: ../rego}\n", AgentsFile: okAgents, ProtocolFile: okProtocol} {
		if err := os.WriteFile(filepath.Join(root, "config", name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(root)
	cfg, err := Load("config", Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "rego"); cfg.Gateway.Policy.Dir != want {
		t.Errorf("policy dir %q, want %q", cfg.Gateway.Policy.Dir, want)
	}
	if want := filepath.Join(root, "config", "data", "audit"); cfg.Gateway.Audit.Dir != want {
		t.Errorf("default audit dir %q, want %q", cfg.Gateway.Audit.Dir, want)
	}
}
