package sacp

import (
	"encoding/json"
	"testing"
)

func TestFallback(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string // Compact()
	}{
		{
			name: "plain text",
			raw:  "I cannot answer in JSON.",
			want: `{"thought":"System Note: LLM failed to provide structured JSON output.","status":"failure","data":{"raw_output":"I cannot answer in JSON."},"message":"The LLM returned an invalid response format."}`,
		},
		{
			name: "quotes, newlines and html survive",
			raw:  "say \"hi\"\n<b>&</b>",
			want: `{"thought":"System Note: LLM failed to provide structured JSON output.","status":"failure","data":{"raw_output":"say \"hi\"\n<b>&</b>"},"message":"The LLM returned an invalid response format."}`,
		},
		{
			name: "invalid utf-8 becomes an escaped U+FFFD",
			raw:  "a\xffb",
			want: `{"thought":"System Note: LLM failed to provide structured JSON output.","status":"failure","data":{"raw_output":"a\ufffdb"},"message":"The LLM returned an invalid response format."}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Fallback(tt.raw)
			if got := string(r.Compact()); got != tt.want {
				t.Errorf("Compact() =\n%s\nwant\n%s", got, tt.want)
			}
			// The fallback must itself be a valid SACP answer, or the
			// workflow downstream breaks on exactly the answers it rescues.
			if out := (*Validator)(nil).Check(string(r.Compact())); !out.Valid {
				t.Errorf("fallback does not validate: %v", out.Errors)
			}
			var data struct {
				RawOutput *string `json:"raw_output"`
			}
			if err := json.Unmarshal(r.Data, &data); err != nil || data.RawOutput == nil {
				t.Fatalf("data = %s, want {\"raw_output\": ...} (%v)", r.Data, err)
			}
		})
	}
}
