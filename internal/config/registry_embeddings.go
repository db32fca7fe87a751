package config

import (
	"path"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/upstream"
	"gopkg.in/yaml.v3"
)

// registryEmbeddings checks registry.embeddings against the upstreams: the
// model must be one the named upstream serves (its models globs), else
// every text query would quietly fall back to the lexical ranking.
func (l *loader) registryEmbeddings(n *yaml.Node, r *Registry, ups []upstream.Config) {
	e := r.Embeddings
	if n == nil || e == nil {
		return
	}
	at := func(p ...string) int { return lineOf(n, append([]string{"registry", "embeddings"}, p...)...) }
	if e.Upstream == "" || e.Model == "" {
		l.add(RegistryFile, at(), "registry.embeddings: upstream and model are both required")
		return
	}
	names := make([]string, 0, len(ups))
	for _, u := range ups {
		names = append(names, u.Name)
		if u.Name != e.Upstream {
			continue
		}
		for _, glob := range u.Models {
			if ok, _ := path.Match(glob, e.Model); ok {
				return
			}
		}
		var literals []string
		for _, m := range u.Models {
			if !isGlob(m) {
				literals = append(literals, m)
			}
		}
		l.add(RegistryFile, at("model"), "registry.embeddings.model %q: upstream %q serves no such model (its models: %v)%s", e.Model, e.Upstream, u.Models, confkit.DidYouMean(e.Model, literals))
		return
	}
	l.add(RegistryFile, at("upstream"), "registry.embeddings.upstream %q: no such upstream in %s%s", e.Upstream, GatewayFile, confkit.DidYouMean(e.Upstream, names))
}
