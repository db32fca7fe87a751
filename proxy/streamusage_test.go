package proxy

import (
	"encoding/json"
	"testing"
)

// The usage chunk is how a stream is charged: the gateway asks for it in
// every streamed request, touching nothing else of the checked bytes.
func TestWithStreamUsage(t *testing.T) {
	tests := []struct {
		name, in, want string
		added          bool
	}{
		{"absent", `{"model":"m","stream":true}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, true},
		{"absent, spaces kept", "{\"model\": \"m\" ,\n \"x\":[1, 2] }\n", "{\"model\": \"m\" ,\n \"x\":[1, 2] ,\"stream_options\":{\"include_usage\":true}}\n", true},
		{"null", `{"stream_options":null,"model":"m"}`, `{"stream_options":{"include_usage":true},"model":"m"}`, true},
		{"false", `{"model":"m","stream_options":{"include_usage":false}}`, `{"model":"m","stream_options":{"include_usage":true}}`, true},
		{"other options kept", `{"stream_options":{"x":{"y":1},"include_usage":false},"model":"m"}`, `{"stream_options":{"x":{"y":1},"include_usage":true},"model":"m"}`, true},
		{"already true", `{"stream_options":{"include_usage":true}}`, `{"stream_options":{"include_usage":true}}`, false},
		{"not an object: the provider refuses it", `{"stream_options":"yes"}`, `{"stream_options":"yes"}`, false},
		{"empty object", `{}`, `{"stream_options":{"include_usage":true}}`, true},
		{"escaped names are names", `{"stream\u005foptions":{"include_usage":true}}`, `{"stream\u005foptions":{"include_usage":true}}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, added := withStreamUsage([]byte(tc.in))
			if string(got) != tc.want || added != tc.added {
				t.Fatalf("withStreamUsage(%s) = %s, %v; want %s, %v", tc.in, got, added, tc.want, tc.added)
			}
			if !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}
