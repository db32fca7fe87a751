package admin

import (
	_ "embed"
	"net/http"

	"github.com/sacpgw/gateway/internal/httpx"
)

// openAPI describes the admin API (OpenAPI 3.1), written by hand and
// checked against the routes by a test.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI is the document served at GET /openapi.json.
func OpenAPI() []byte { return openAPI }

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	httpx.WriteRawJSON(w, http.StatusOK, openAPI)
}
