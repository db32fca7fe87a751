package anthropic

import (
	"testing"
)

func TestError(t *testing.T) {
	const body = `{"error":{"message":"Agent copilot-2 exceeded 200 requests per hour.","type":"rate_limit_error","code":"rate_limit_exceeded","param":null}}`
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"400", 400, `{"error":{"message":"Missing required parameter: 'messages'.","type":"invalid_request_error","code":"invalid_request","param":"messages"}}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"Missing required parameter: 'messages'."}}`},
		{"401", 401, `{"error":{"message":"Unknown token.","type":"authentication_error","code":"invalid_api_key"}}`,
			`{"type":"error","error":{"type":"authentication_error","message":"Unknown token."}}`},
		{"402", 402, `{"error":{"message":"Budget spent.","type":"insufficient_quota"}}`,
			`{"type":"error","error":{"type":"billing_error","message":"Budget spent."}}`},
		{"403", 403, `{"error":{"message":"Denied by policy.","type":"permission_error","code":"policy_denied"}}`,
			`{"type":"error","error":{"type":"permission_error","message":"Denied by policy."}}`},
		{"404 model", 404, `{"error":{"message":"The model ` + "`x`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","code":"model_not_found","param":"model"}}`,
			`{"type":"error","error":{"type":"not_found_error","message":"The model ` + "`x`" + ` does not exist or you do not have access to it."}}`},
		{"413", 413, `{"error":{"message":"Request body exceeds this agent's max_request_size of 10240 bytes.","type":"invalid_request_error","code":"request_too_large"}}`,
			`{"type":"error","error":{"type":"request_too_large","message":"Request body exceeds this agent's max_request_size of 10240 bytes."}}`},
		{"422 other 4xx", 422, `{"error":{"message":"Unprocessable.","type":"invalid_request_error"}}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"Unprocessable."}}`},
		{"429", 429, body,
			`{"type":"error","error":{"type":"rate_limit_error","message":"Agent copilot-2 exceeded 200 requests per hour."}}`},
		{"500", 500, `{"error":{"message":"The gateway failed to process the request.","type":"server_error","code":"internal_error"}}`,
			`{"type":"error","error":{"type":"api_error","message":"The gateway failed to process the request."}}`},
		{"502", 502, `{"error":{"message":"Upstream openai failed: connection refused.","type":"upstream_error","code":"upstream_error"}}`,
			`{"type":"error","error":{"type":"api_error","message":"Upstream openai failed: connection refused."}}`},
		{"503", 503, `{"error":{"message":"The gateway's shared state is unavailable; retry shortly.","type":"server_error","code":"state_unavailable"}}`,
			`{"type":"error","error":{"type":"overloaded_error","message":"The gateway's shared state is unavailable; retry shortly."}}`},
		{"504", 504, `{"error":{"message":"Upstream openai did not answer within 1m0s.","type":"upstream_error","code":"upstream_error"}}`,
			`{"type":"error","error":{"type":"timeout_error","message":"Upstream openai did not answer within 1m0s."}}`},
		{"529", 529, `{"error":{"message":"Overloaded","type":"overloaded_error"}}`,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{"other 5xx", 507, `{"error":{"message":"Full.","type":"server_error"}}`,
			`{"type":"error","error":{"type":"api_error","message":"Full."}}`},
		{"status not an error", 200, `{"error":{"message":"odd","type":"server_error"}}`,
			`{"type":"error","error":{"type":"api_error","message":"odd"}}`},
		{"error as a string", 400, `{"error":"bad model"}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"bad model"}}`},
		{"no message", 429, `{"error":{"type":"rate_limit_error"}}`,
			`{"type":"error","error":{"type":"rate_limit_error","message":"Too Many Requests"}}`},
		{"HTML page", 502, `<html><body>Bad Gateway</body></html>`,
			`{"type":"error","error":{"type":"api_error","message":"Bad Gateway"}}`},
		{"empty body, unknown status", 599, ``,
			`{"type":"error","error":{"type":"api_error","message":"The upstream failed."}}`},
		{"invalid UTF-8", 400, "{\"error\":{\"message\":\"bad \xff\"}}",
			`{"type":"error","error":{"type":"invalid_request_error","message":"Bad Request"}}`},
		{"message with markup kept", 400, `{"error":{"message":"use <token> & \"quotes\"","type":"invalid_request_error"}}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"use <token> & \"quotes\""}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Error(tc.status, []byte(tc.body))
			// Byte for byte: the body is small and its order is
			// Anthropic's (type first).
			if string(got) != tc.want {
				t.Errorf("Error(%d, %s)\n got %s\nwant %s", tc.status, tc.body, got, tc.want)
			}
		})
	}
}

func TestStreamType(t *testing.T) {
	for in, want := range map[string]string{
		"invalid_request_error": "invalid_request_error",
		"authentication_error":  "authentication_error",
		"permission_error":      "permission_error",
		"not_found_error":       "not_found_error",
		"rate_limit_error":      "rate_limit_error",
		"upstream_error":        "api_error",
		"server_error":          "api_error",
		"":                      "api_error",
		"something_new":         "api_error",
	} {
		if got := streamType(in); got != want {
			t.Errorf("streamType(%q) = %q, want %q", in, got, want)
		}
	}
}
