package approval

import (
	"encoding/json"
	"mime"
	"net/http"
	"strings"

	"github.com/sacpgw/gateway/internal/door"
)

// The front page (GET /): what this server is and where to go, for the
// person who opens the gateway's address in a browser; GET /review leads
// to the queue. A client that asks for JSON alone (Accept:
// application/json, without text/html) gets the same links as JSON, so a
// script probing the address reads an answer rather than a page.

// homeLinks are the front page's links, by name; the JSON answer is them.
type homeLinks struct {
	OpenAI     string `json:"openai_base_url"`
	Review     string `json:"review_queue"`
	Operations string `json:"operations,omitempty"`
	Health     string `json:"health"`
	Ready      string `json:"ready"`
	Metrics    string `json:"metrics"`
	Reference  string `json:"api_reference"`
}

type homePage struct {
	// Base is the address agents use, as the browser reached it (or the
	// configured approval.base_url).
	Base  string
	Links homeLinks
}

// apiReference is where the HTTP API is documented: the gateway's source
// ships it as docs/reference.md.
const apiReference = "docs/reference.md in the gateway's source"

func (s *Service) homeRoutes(withOps bool) []door.Route {
	links := homeLinks{OpenAI: "/v1", Review: "/review/queue", Health: "/healthz", Ready: "/readyz", Metrics: "/metrics", Reference: apiReference}
	if withOps {
		links.Operations = "/review/ops"
	}
	toQueue := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/review/queue", http.StatusSeeOther)
	})
	return []door.Route{
		{Method: http.MethodGet, Path: "/", Handler: endpoint(func(w http.ResponseWriter, r *http.Request) error { return s.home(w, r, links) }), Access: door.Public},
		{Method: http.MethodGet, Path: "/review", Handler: toQueue, Access: door.Public},
		{Method: http.MethodGet, Path: "/review/", Handler: toQueue, Access: door.Public},
	}
}

func (s *Service) home(w http.ResponseWriter, r *http.Request, links homeLinks) error {
	if wantsJSON(r.Header.Values("Accept")) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		return json.NewEncoder(w).Encode(links)
	}
	return render(w, http.StatusOK, "home", homePage{Base: s.externalURL(r, "", ""), Links: links})
}

// wantsJSON reports whether an Accept header names application/json and
// not text/html (a browser names text/html; curl's */* gets the page).
func wantsJSON(accept []string) bool {
	json, html := false, false
	for _, v := range accept {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || params["q"] == "0" {
				continue
			}
			switch mt {
			case "application/json":
				json = true
			case "text/html":
				html = true
			}
		}
	}
	return json && !html
}
