package roster

import (
	"slices"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/names"
)

// fileOnly are the fields of an entry an agent created through the admin
// API may not set: its keys are issued by the API (a hash given by the
// caller would be a key without id, expiry or revocation), and a path or a
// certificate identity belongs to the files the operator deploys.
var fileOnly = [...]string{"token_sha256", "data_schema_file", "spiffe_id"}

// FileOnly reports whether field is one only agents.yaml may set.
func FileOnly(field string) bool {
	return slices.Contains(fileOnly[:], field)
}

// CheckRuntime checks an agent created through the admin API as Check
// checks an entry of the file, through r: its name, defaults, roles,
// protocol, links, embedding and the messages it may send, whose
// recipients are looked up in agents (the file's and the other run-time
// ones). Its identity is its issued keys, so none is required here.
func CheckRuntime(r confkit.Reporter, a *Agent, agents map[string]*Agent) {
	if err := names.Check(a.ID); err != nil {
		r.Add(a.at(r), "agents: %v", err)
	}
	a.checkRoles(r)
	a.checkProtocol(r)
	a.checkLinks(r)
	a.checkEmbedding(r, nil)
	all := make(map[string]*Agent, len(agents)+1)
	for id, other := range agents {
		all[id] = other
	}
	all[a.ID] = a
	a.checkMessages(r, all)
}
