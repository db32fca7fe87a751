package anthropic

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/dialect/internal/dialecttest"
)

// seeds adds the files of testdata matching pattern to f's corpus.
func seeds(f *testing.F, pattern string, skip func(string) bool) {
	dialecttest.Seeds(f, pattern, skip)
}

// FuzzRequest: the decoder never panics; what it accepts translates to one
// JSON object that the gateway's pipeline can read (model, messages with
// roles, max_tokens, stream as reported), the same every time.
func FuzzRequest(f *testing.F) {
	seeds(f, "request/*.json", func(name string) bool { return strings.HasSuffix(name, ".chat.json") })
	for _, s := range []string{
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}],"is_error":true},{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lG"}}]}],"stream":true}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"i","name":"n","input":{"k":[1,{"z":null}]}}]},{"role":"user","content":"y"}],"tools":[{"name":"n","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"n"}}`,
		`{"model":"m","max_tokens":1,"model":"n"}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document"}]}]}`,
		`{"model":"m","messages":[]}`,
		"{\"model\":\"\xff\"}",
		`[]`, `null`, `{}`, ``, `{"messages":[{"content":[[[[[]]]]]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		chat, stream, model, err := Request(body)
		if err != nil {
			if chat != nil || stream || model != "" {
				t.Fatal("an error and a result")
			}
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if !jsontext.Value(chat).IsValid() {
			t.Fatalf("invalid JSON: %s", chat)
		}
		var got struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string         `json:"role"`
				Content jsontext.Value `json:"content"`
			} `json:"messages"`
			MaxTokens *int64 `json:"max_tokens"`
			Stream    bool   `json:"stream"`
		}
		if err := json.Unmarshal(chat, &got, json.RejectUnknownMembers(false)); err != nil {
			t.Fatalf("%v: %s", err, chat)
		}
		if got.Model == "" || got.Model != model || got.Stream != stream || got.MaxTokens == nil || *got.MaxTokens < 1 {
			t.Fatalf("model %q/%q, stream %v/%v, max_tokens %v: %s", got.Model, model, got.Stream, stream, got.MaxTokens, chat)
		}
		if len(got.Messages) == 0 {
			t.Fatalf("no messages: %s", chat)
		}
		for i, m := range got.Messages {
			switch m.Role {
			case "system", "user", "assistant", "tool":
			default:
				t.Fatalf("message %d has role %q", i, m.Role)
			}
		}
		again, _, _, err := Request(body)
		if err != nil || !bytes.Equal(again, chat) {
			t.Fatalf("not deterministic: %v\n%s\n%s", err, chat, again)
		}
	})
}

// FuzzStream: arbitrary upstream bytes never panic the translator; the
// output is a well-formed Anthropic stream that ends once, and the same
// however the input is sliced.
func FuzzStream(f *testing.F) {
	seeds(f, "stream/*.openai.sse", nil)
	for _, s := range []string{
		"", "data: [DONE]\n\n", ": keep-alive\n", "data: {}\n\n", "data:\r\n\r\n", "\r\r\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"id\":\"a\",\"function\":{\"name\":\"b\",\"arguments\":\"{\\\"\"}}]}}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"b\"}},{\"function\":{\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":1}}\n\ndata: [DONE]\n\n",
		"data: {\"error\":{\"message\":\"x\",\"type\":\"rate_limit_error\"}}\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		whole := feedWhole(t, "m", in)
		checkStream(t, whole, true)
		// The slicing is drawn from the input itself, so a failure
		// reproduces from the corpus entry alone.
		var seed uint64
		for _, b := range in {
			seed = seed*31 + uint64(b)
		}
		if sliced := feed(t, "m", in, rand.New(rand.NewPCG(seed, 4))); !bytes.Equal(sliced, whole) {
			t.Fatalf("slicing changed the output:\nwhole:\n%s\nsliced:\n%s", whole, sliced)
		}
	})
}
