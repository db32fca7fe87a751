package config

import (
	"strings"
	"testing"
)

// TestSuggestionsInProblems: every "unknown X" problem whose known set the
// loader has carries the nearest known name, at the line of the mistake.
func TestSuggestionsInProblems(t *testing.T) {
	agent2 := "  reviewer:\n    token_sha256: \"" + strings.Repeat("b", 64) + "\"\n"
	cases := []struct {
		note       string
		gw, ag, pr string
		want       string // "file:line: substring"
	}{
		{"top-level key", okGateway + "lisen: \":1\"\n", okAgents, okProtocol,
			`gateway.yaml:5: unknown key "lisen" (did you mean "listen"?)`},
		{"nested key", okGateway + "audit:\n  fail_mod: open\n", okAgents, okProtocol,
			`gateway.yaml:6: unknown key "fail_mod" in audit (did you mean "fail_mode"?)`},
		{"key in a list item", okGateway + "    max_retires: 1\n", okAgents, okProtocol,
			`gateway.yaml:5: unknown key "max_retires" in upstreams.0 (did you mean "max_retries"?)`},
		{"agent key", okGateway, okAgents + "    rate_limt: 5/minute\n", okProtocol,
			`agents.yaml:4: unknown key "rate_limt" in agents.a1 (did you mean "rate_limit"?)`},
		{"document key", okGateway, "agent:\n  a1: {}\n", okProtocol,
			`agents.yaml:1: unknown key "agent" (did you mean "agents"?)`},
		{"protocol key", okGateway, okAgents, "protocol:\n  timeouts:\n    responce: 5s\n",
			`protocol.yaml:3: unknown key "responce" in protocol.timeouts (did you mean "response"?)`},
		{"upstream type", "upstreams:\n  - name: m\n    type: mokc\n    models: [\"*\"]\n", okAgents, okProtocol,
			`gateway.yaml:3: upstreams[0].type "mokc": want one of anthropic, mock, openai (did you mean "mock"?)`},
		{"log level", okGateway + "log:\n  level: debgu\n", okAgents, okProtocol,
			`gateway.yaml:6: log.level "debgu": want debug, info, warn or error (did you mean "debug"?)`},
		{"state backend", okGateway + "state:\n  backend: reddis\n", okAgents, okProtocol,
			`gateway.yaml:6: state.backend "reddis": want memory or redis (did you mean "redis"?)`},
		{"response format", okGateway, okAgents + "    response_format: json_standrd\n", okProtocol,
			`agents.yaml:4: agent "a1": response_format "json_standrd": want one of none, json_standard, sacp_compact (did you mean "json_standard"?)`},
		{"allowed target", okGateway, okAgents + "    allowed_targets: [desing]\n", okProtocol,
			`agents.yaml:4: agent "a1": allowed_targets: unknown target "desing" (want architecture, design, code, test, docs, all) (did you mean "design"?)`},
		{"message recipient", okGateway, okAgents + "    messages:\n      - to: [reveiwer]\n        actions: [x]\n" + agent2, okProtocol,
			`agents.yaml:5: agent "a1": messages[0].to: unknown agent "reveiwer" (want an agent id, "*" or "broadcast") (did you mean "reviewer"?)`},
		{"broadcast", okGateway, okAgents + "    messages:\n      - to: [braodcast]\n        actions: [x]\n", okProtocol,
			`agents.yaml:5: agent "a1": messages[0].to: unknown agent "braodcast" (want an agent id, "*" or "broadcast") (did you mean "broadcast"?)`},
		{"detector", okGateway, okAgents, "protocol:\n  redaction:\n    detectors: [emial]\n",
			`protocol.yaml:3: protocol.redaction.detectors: unknown detector "emial" (want email, phone, credit_card, iban, ssn, api_key, jwt, ipv4) (did you mean "email"?)`},
		{"blocked detector", okGateway, okAgents, "protocol:\n  redaction:\n    detectors: [email, jwt]\n    block: [jtw]\n",
			`protocol.yaml:4: protocol.redaction.block: "jtw" is not an enabled detector (did you mean "jwt"?)`},
		{"apply_to field", okGateway, okAgents, "protocol:\n  redaction:\n    apply_to: [mesage]\n",
			`protocol.yaml:3: protocol.redaction.apply_to: unknown SACP field "mesage" (want thought, message, data, next_step_hint) (did you mean "message"?)`},
		{"allow-listed model", okGateway2, okAgents + "    models: [gpt-4o-mni]\n", okProtocol,
			`agents.yaml:4: agent "a1": models: "gpt-4o-mni" is served by no upstream in gateway.yaml (their models: gpt-4o, gpt-4o-mini) (did you mean "gpt-4o-mini"?)`},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			_, err := loadFiles(t, tc.gw, tc.ag, tc.pr, nil)
			if err == nil {
				t.Fatalf("loaded; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("problems:\n%v\nwant one containing %q", err, tc.want)
			}
		})
	}
}

// TestNoSuggestionForAStranger: a name near nothing known gets no hint, so
// a hint is never a guess.
func TestNoSuggestionForAStranger(t *testing.T) {
	_, err := loadFiles(t, okGateway+"colour: blue\n", okAgents, okProtocol, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown key "colour"`) || strings.Contains(err.Error(), "did you mean") {
		t.Fatalf("got %v, want the unknown key without a hint", err)
	}
}
