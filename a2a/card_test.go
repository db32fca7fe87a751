package a2a

import (
	"strings"
	"testing"
)

func TestParseCard(t *testing.T) {
	const base = "http://agent.example:8000"
	iface := func(url, binding, version string) string {
		return `{"url":"` + url + `","protocolBinding":"` + binding + `","protocolVersion":"` + version + `"}`
	}
	card := func(ifaces, skills string) []byte {
		return []byte(`{"name":"A","description":"d","version":"1","capabilities":{},"defaultInputModes":[],"defaultOutputModes":[],` +
			`"supportedInterfaces":[` + ifaces + `],"skills":[` + skills + `]}`)
	}
	ok := iface(base+"/rpc", "JSONRPC", "1.0")
	skill := `{"id":"s","name":"S","description":"d","tags":[]}`
	c, endpoint, err := parseCard(card(iface(base+"/grpc", "GRPC", "1.0")+","+ok, skill), base)
	if err != nil || endpoint != base+"/rpc" || c.Name != "A" {
		t.Fatalf("good card: %v, %q", err, endpoint)
	}
	for _, tc := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"another origin", card(iface("http://169.254.169.254/rpc", "JSONRPC", "1.0"), skill), "origin"},
		{"credentials in the interface", card(iface("http://u:p@agent.example:8000/rpc", "JSONRPC", "1.0"), skill), "origin"},
		{"0.3 only", card(iface(base+"/rpc", "JSONRPC", "0.3"), skill), "no JSON-RPC interface"},
		{"repeated skill", card(ok, skill+","+skill), "repeated"},
		{"no name", []byte(`{"name":"","supportedInterfaces":[` + ok + `],"skills":[]}`), "no name"},
		{"duplicate member", []byte(`{"name":"A","name":"B","supportedInterfaces":[` + ok + `],"skills":[]}`), "duplicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := parseCard(tc.raw, base); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
