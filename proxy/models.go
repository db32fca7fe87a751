package proxy

import (
	"encoding/json"
	"net/http"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/scope"
)

// Model is GET /v1/models/{id} (the SDKs' models.retrieve): the model if
// this agent may use it and an upstream serves it, else 404
// model_not_found, as the provider would answer for a model it lacks. The
// id is the rest of the path, so names with a slash work.
func (g *Gateway) Model() http.Handler { return Chain(g.retrieveModel, g.ident) }

func (g *Gateway) retrieveModel(w http.ResponseWriter, r *http.Request) error {
	a := scope.Get(r.Context()).Agent
	id := r.PathValue("*")
	up := g.upstreams.Route(id)
	if id == "" || up == nil || !Allowed(a, id) {
		return apierror.ModelNotFound(id)
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(modelEntry{ID: id, Object: "model", Created: startEpoch, OwnedBy: up.Name})
}
