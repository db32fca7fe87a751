package registry

import (
	"net/http"

	"github.com/sacpgw/gateway/compact"
	"github.com/sacpgw/gateway/internal/httpx"
)

// list is the answer of the library routes: {"object": "list", "data"},
// the shape of the gateway's other listings.
type list[T any] struct {
	Object string `json:"object"`
	Data   []T    `json:"data"`
}

// Verbs serves GET /registry/verbs: every verb of the library (configured
// and spawned), with its aliases, inputs and outputs, sorted by name. A
// planner needs them to write a plan the gateway will accept.
func (a *API) Verbs(w http.ResponseWriter, r *http.Request) {
	lib := a.library(r)
	verbs := lib.Verbs()
	for i := range verbs {
		verbs[i].Inputs = nonNil(verbs[i].Inputs)
	}
	writeList(w, r, verbs)
}

// Tools serves GET /registry/tools: every tool of the library, sorted by id.
func (a *API) Tools(w http.ResponseWriter, r *http.Request) {
	tools := a.library(r).Tools()
	for i := range tools {
		tools[i].SupportedVerbs = nonNil(tools[i].SupportedVerbs)
	}
	writeList(w, r, tools)
}

// Agents serves GET /registry/agents: every agent, configured first, then
// spawned, each as POST /registry/query shows it (any agent may find any
// other there, so listing them reveals nothing more; endpoints, token
// hashes and embeddings stay hidden, as Entry's JSON form leaves them out).
func (a *API) Agents(w http.ResponseWriter, r *http.Request) {
	entries, err := a.Registry.Entries(r.Context())
	if err != nil {
		a.Log.Warn("registry: listing the last known registry", "error", err.Error())
	}
	writeList(w, r, entries)
}

// library is the current library; a Store that cannot be read leaves the
// last known one, as for validation.
func (a *API) library(r *http.Request) *compact.Library {
	lib, err := a.Registry.Library(r.Context())
	if err != nil {
		a.Log.Warn("registry: listing the last known library", "error", err.Error())
	}
	return lib
}

func writeList[T any](w http.ResponseWriter, r *http.Request, data []T) {
	if data == nil {
		data = []T{}
	}
	httpx.WriteJSON(w, r, http.StatusOK, list[T]{Object: "list", Data: data})
}
