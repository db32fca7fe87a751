// Package pagekit is what every server-rendered page of the gateway (the
// review site, the operator page, the admin console) shares: the style
// (a viewport, readable at 390 px wide, no external resource) and the
// headers that keep a page inert: no script source ever, no framing, no
// caching.
package pagekit

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
)

// styleHTML defines the template "style": the viewport and the style
// sheet, inline (the pages' Content-Security-Policy allows inline style
// and nothing else).
//
//go:embed style.html
var styleHTML string

// WithStyle adds the template "style" to t, for a page's <head>.
func WithStyle(t *template.Template) *template.Template {
	return template.Must(t.Parse(styleHTML))
}

// Render writes the page name of t with the headers every page carries:
// no caching, no framing, no scripts, no referrer beyond the site.
func Render(w http.ResponseWriter, status int, t *template.Template, name string, data any) error {
	return RenderFormTo(w, status, t, name, data, "")
}

// RenderFormTo is Render for a page whose form's answer redirects to
// another origin (a consent page sending the browser back to an app):
// form-action, which browsers apply to a form's redirects too, also allows
// formTo (a scheme and host, or a private-use scheme "app:"); "" adds
// nothing.
func RenderFormTo(w http.ResponseWriter, status int, t *template.Template, name string, data any, formTo string) error {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, data); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// An inline drawing (a workflow graph, a chart) needs nothing more: it
	// is inline markup (no image request), and its colours are SVG
	// presentation attributes, which style-src does not govern. No script
	// source, ever.
	formAction := "'self'"
	if formTo != "" {
		formAction += " " + formTo
	}
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action "+formAction+"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer browsers send
	// "Origin: null" with the page's own form posts, which a same-origin
	// check must refuse. Other sites still never see the page's URL.
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	return nil
}
