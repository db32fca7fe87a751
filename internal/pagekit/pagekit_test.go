package pagekit

import (
	"html/template"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRender: a page carries the viewport and the style inline, and the
// headers that keep it inert (no script source, no framing, no caching);
// a template that fails writes nothing.
func TestRender(t *testing.T) {
	pages := template.Must(WithStyle(template.New("p")).Parse(`{{define "page"}}<head>{{template "style"}}</head><p>{{.}}</p>{{end}}{{define "bad"}}{{.Missing}}{{end}}`))
	w := httptest.NewRecorder()
	if err := Render(w, 200, pages, "page", "<b>x</b>"); err != nil {
		t.Fatal(err)
	}
	body, h := w.Body.String(), w.Header()
	if !strings.Contains(body, `<meta name="viewport" content="width=device-width, initial-scale=1">`) || !strings.Contains(body, "&lt;b&gt;x&lt;/b&gt;") {
		t.Errorf("page: %s", body)
	}
	csp := h.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") || h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("headers: %v", h)
	}
	w = httptest.NewRecorder()
	if err := Render(w, 200, pages, "bad", "a string has no fields"); err == nil || w.Body.Len() != 0 || w.Code != 200 || len(w.Header()) != 0 {
		t.Errorf("a failing template: %v, wrote %d %q %v", err, w.Code, w.Body.String(), w.Header())
	}
}
