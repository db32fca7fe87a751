package responses

import (
	"testing"
)

func TestError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"400 passes through", 400, `{"error":{"message":"Missing required parameter: 'messages'.","type":"invalid_request_error","code":"invalid_request","param":"messages"}}`,
			`{"error":{"message":"Missing required parameter: 'messages'.","type":"invalid_request_error","param":"messages","code":"invalid_request"}}`},
		{"member order and spacing normalized", 401, `{ "error" : { "code" : "invalid_api_key", "type" : "authentication_error", "message" : "Unknown token." } }`,
			`{"error":{"message":"Unknown token.","type":"authentication_error","param":null,"code":"invalid_api_key"}}`},
		{"403 policy", 403, `{"error":{"message":"Denied by policy.","type":"permission_error","code":"policy_denied"}}`,
			`{"error":{"message":"Denied by policy.","type":"permission_error","param":null,"code":"policy_denied"}}`},
		{"429", 429, `{"error":{"message":"Agent copilot-2 exceeded 200 requests per hour.","type":"rate_limit_error","code":"rate_limit_exceeded","param":null}}`,
			`{"error":{"message":"Agent copilot-2 exceeded 200 requests per hour.","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`},
		{"502 upstream", 502, `{"error":{"message":"Upstream openai failed: connection refused.","type":"upstream_error","code":"upstream_error"}}`,
			`{"error":{"message":"Upstream openai failed: connection refused.","type":"upstream_error","param":null,"code":"upstream_error"}}`},
		{"provider extras dropped", 500, `{"error":{"message":"Boom.","type":"server_error","code":null,"param":null,"internal":{"trace":"x"}},"request_id":"r1"}`,
			`{"error":{"message":"Boom.","type":"server_error","param":null,"code":null}}`},
		{"number code as a string", 429, `{"error":{"message":"Slow down.","type":"rate_limit_error","code":429}}`,
			`{"error":{"message":"Slow down.","type":"rate_limit_error","param":null,"code":"429"}}`},
		{"no type: the status's", 404, `{"error":{"message":"No such model."}}`,
			`{"error":{"message":"No such model.","type":"not_found_error","param":null,"code":null}}`},
		{"type not a string: the status's", 400, `{"error":{"message":"Bad.","type":7,"param":["x"],"code":{}}}`,
			`{"error":{"message":"Bad.","type":"invalid_request_error","param":null,"code":null}}`},
		{"error as a string", 400, `{"error":"bad model"}`,
			`{"error":{"message":"bad model","type":"invalid_request_error","param":null,"code":null}}`},
		{"no message", 429, `{"error":{"type":"rate_limit_error"}}`,
			`{"error":{"message":"Too Many Requests","type":"rate_limit_error","param":null,"code":null}}`},
		{"blank message", 503, `{"error":{"message":"  ","type":"server_error"}}`,
			`{"error":{"message":"Service Unavailable","type":"server_error","param":null,"code":null}}`},
		{"HTML page", 502, `<html><body>Bad Gateway</body></html>`,
			`{"error":{"message":"Bad Gateway","type":"server_error","param":null,"code":null}}`},
		{"other 4xx", 422, `[]`,
			`{"error":{"message":"Unprocessable Entity","type":"invalid_request_error","param":null,"code":null}}`},
		{"empty body, unknown status", 599, ``,
			`{"error":{"message":"The upstream failed.","type":"server_error","param":null,"code":null}}`},
		{"invalid UTF-8", 400, "{\"error\":{\"message\":\"bad \xff\"}}",
			`{"error":{"message":"Bad Request","type":"invalid_request_error","param":null,"code":null}}`},
		{"duplicate member", 400, `{"error":{"message":"a","message":"b"}}`,
			`{"error":{"message":"Bad Request","type":"invalid_request_error","param":null,"code":null}}`},
		{"message with markup kept", 400, `{"error":{"message":"use <token> & \"quotes\"","type":"invalid_request_error"}}`,
			`{"error":{"message":"use <token> & \"quotes\"","type":"invalid_request_error","param":null,"code":null}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Error(tc.status, []byte(tc.body))
			// Byte for byte: the body is small and its order is OpenAI's.
			if string(got) != tc.want {
				t.Errorf("Error(%d, %s)\n got %s\nwant %s", tc.status, tc.body, got, tc.want)
			}
		})
	}
}
