package door

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/roster"
)

// issuedKeys answers for the keys of the admin API: key → (name, run-time
// agent); "down" is a state backend that cannot be read.
type issuedKeys map[string]struct {
	name    string
	runtime *roster.Agent
}

func (k issuedKeys) AgentByKey(_ context.Context, sum [sha256.Size]byte) (string, *roster.Agent, bool, error) {
	for key, v := range k {
		if sha256.Sum256([]byte(key)) == sum {
			if key == "down" {
				return "", nil, false, errors.New("redis: connection refused")
			}
			return v.name, v.runtime, true, nil
		}
	}
	return "", nil, false, nil
}

// TestIdentifyIssuedKeys: a key issued for an agents.yaml agent is that
// agent as this configuration has it; a run-time agent's key is the
// run-time agent, unless the file now defines its name (refused: neither
// silently wins); a key of an agent the file dropped is refused; a state
// backend that cannot be read is 503, and the file's own tokens need no
// lookup at all.
func TestIdentifyIssuedKeys(t *testing.T) {
	file := &roster.Agent{ID: "copilot-2", TokenSHA256: "set", TokenHash: roster.HashToken("tok-copilot")}
	id, err := NewIdentifier(map[string]*roster.Agent{"copilot-2": file}, "")
	if err != nil {
		t.Fatal(err)
	}
	rt := &roster.Agent{ID: "rt-bot"}
	id.Keys = issuedKeys{
		"key-file":    {name: "copilot-2"},
		"key-rt":      {name: "rt-bot", runtime: rt},
		"key-clash":   {name: "copilot-2", runtime: &roster.Agent{ID: "copilot-2"}},
		"key-dropped": {name: "gone"},
		"down":        {},
	}
	for key, want := range map[string]struct {
		agent  *roster.Agent
		status int
	}{
		"key-file":    {file, 200},
		"key-rt":      {rt, 200},
		"tok-copilot": {file, 200},
		"key-clash":   {nil, 401},
		"key-dropped": {nil, 401},
		"down":        {nil, 503},
		"unknown":     {nil, 401},
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		a, err := id.Identify(r)
		got := 200
		if err != nil {
			got = apierror.From(err).Status
		}
		if got != want.status || a != want.agent {
			t.Errorf("%s: identified %v, err %v: want %v, %d", key, a, err, want.agent, want.status)
		}
	}
}
