// Package proxy is the request pipeline of the OpenAI-compatible front door:
// a chain of small stages built once at startup (identify → read body →
// route → limit → forward), each using net/http types so that everything
// below the HTTP shell can be tested with httptest alone.
package proxy

import (
	"net/http"

	"github.com/sacpgw/gateway/internal/httpx"
)

// A Stage handles one step: it calls next to continue, or returns an error
// to stop the request. Stages never write error bodies themselves; the chain
// maps the error to HTTP in one place.
type Stage interface {
	Serve(w http.ResponseWriter, r *http.Request, next http.Handler) error
}

// StageFunc adapts a function to a Stage.
type StageFunc func(w http.ResponseWriter, r *http.Request, next http.Handler) error

// Serve implements Stage.
func (f StageFunc) Serve(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	return f(w, r, next)
}

// Endpoint is the last step of a chain; like a Stage it reports failure by
// returning an error.
type Endpoint func(w http.ResponseWriter, r *http.Request) error

// Chain compiles stages, in order, in front of end.
func Chain(end Endpoint, stages ...Stage) http.Handler {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := end(w, r); err != nil {
			httpx.Fail(w, r, err)
		}
	})
	for i := len(stages) - 1; i >= 0; i-- {
		s, next := stages[i], h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := s.Serve(w, r, next); err != nil {
				httpx.Fail(w, r, err)
			}
		})
	}
	return h
}
