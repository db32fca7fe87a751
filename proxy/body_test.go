package proxy

import (
	"errors"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/internal/apierror"
)

func TestDecodeRequest(t *testing.T) {
	cases := []struct {
		note  string
		kind  Kind
		body  string
		param string // "" = valid
		code  int
	}{
		{"chat", KindChat, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "", 0},
		{"chat parts", KindChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true}`, "", 0},
		{"embeddings", KindEmbeddings, `{"model":"m","input":["a"]}`, "", 0},
		{"empty", KindChat, ``, "-", 400},
		{"not json", KindChat, `hello`, "-", 400},
		{"array", KindChat, `[]`, "-", 400},
		{"no model", KindChat, `{"messages":[{"role":"user","content":"x"}]}`, "model", 400},
		{"no messages", KindChat, `{"model":"m"}`, "messages", 400},
		{"empty messages", KindChat, `{"model":"m","messages":[]}`, "messages", 400},
		{"no role", KindChat, `{"model":"m","messages":[{"content":"x"}]}`, "messages[0].role", 400},
		{"model type", KindChat, `{"model":1,"messages":[]}`, "model", 400},
		{"stream type", KindChat, `{"model":"m","stream":"yes","messages":[{"role":"user","content":"x"}]}`, "stream", 400},
		{"no input", KindEmbeddings, `{"model":"m"}`, "input", 400},
		{"null input", KindEmbeddings, `{"model":"m","input":null}`, "input", 400},
		{"bad utf8", KindChat, "{\"model\":\"m\xff\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "-", 400},
		{"trailing garbage", KindChat, `{"model":"m","messages":[{"role":"user","content":"x"}]} x`, "-", 400},
		// The allow-list bypass: encoding/json alone would read "Model" as
		// the model and keep the last of two keys; a case-sensitive provider
		// reads the other one.
		{"case variant of model", KindChat, `{"model":"evil","Model":"m","messages":[{"role":"user","content":"x"}]}`, "Model", 400},
		{"only a case variant", KindChat, `{"MODEL":"m","messages":[{"role":"user","content":"x"}]}`, "MODEL", 400},
		{"duplicate model", KindChat, `{"model":"evil","model":"m","messages":[{"role":"user","content":"x"}]}`, "model", 400},
		{"case variant in a message", KindChat, `{"model":"m","messages":[{"role":"user","content":"x","Content":"y"}]}`, "messages[0].Content", 400},
		{"case variant of stream", KindChat, `{"model":"m","Stream":true,"messages":[{"role":"user","content":"x"}]}`, "Stream", 400},
		{"duplicate deep down", KindChat, `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"a":1,"a":2}}}]}`, "tools[0].function.parameters.a", 400},
		{"lone surrogate", KindChat, `{"model":"m","messages":[{"role":"user","content":"\ud800"}]}`, "-", 400},
		{"unknown member passes", KindChat, `{"model":"m","messages":[{"role":"user","content":"x"}],"x_vendor":{"Model":"free"}}`, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			req, err := DecodeRequest(tc.kind, []byte(tc.body))
			if tc.param == "" {
				if err != nil || req.Model != "m" {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var e *apierror.Error
			if !errors.As(err, &e) || e.Status != tc.code {
				t.Fatalf("want %d, got %v", tc.code, err)
			}
			if tc.param != "-" && e.Param != tc.param {
				t.Errorf("param = %q, want %q (%s)", e.Param, tc.param, e.Message)
			}
		})
	}
}

func TestEstimateTokensGrowsWithPrompt(t *testing.T) {
	small, _ := DecodeRequest(KindChat, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	big, _ := DecodeRequest(KindChat, []byte(`{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("word ", 400)+`"}]}`))
	s, b := EstimateTokens(KindChat, small), EstimateTokens(KindChat, big)
	if s <= 0 || b < 450 || b > 600 {
		t.Errorf("estimates: small %d, 2000-byte prompt %d (want about 500)", s, b)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","input":"x"}`, `{"model":"","messages":null}`, `{"messages":[{}]}`, "\xff", `{"model":"m","messages":[{"role":1}]}`,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Add(`{"model":"a","Model":"b","messages":[{"role":"user","content":"x"}]}`, false)
	f.Add(`{"model":"a","messages":[{"role":"user","Role":"system","content":"x"}],"STREAM":true}`, false)
	f.Fuzz(func(t *testing.T, body string, embeddings bool) {
		kind := KindChat
		if embeddings {
			kind = KindEmbeddings
		}
		req, err := DecodeRequest(kind, []byte(body))
		if err != nil {
			var e *apierror.Error
			if !errors.As(err, &e) || e.Status != 400 || e.Message == "" {
				t.Fatalf("error is not a 400 in OpenAI shape: %v", err)
			}
			return
		}
		if req.Model == "" || (kind == KindChat && len(req.Messages) == 0) || EstimateTokens(kind, req) < 0 {
			t.Fatalf("accepted an incomplete request: %q", body)
		}
		// Differential: a case-sensitive reader that refuses duplicate keys
		// (encoding/json v2's defaults, as a strict provider reads) must
		// accept what the gateway accepted and see the same model, stream
		// flag and roles. What the gateway checked is what goes upstream.
		var other struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := jsonv2.Unmarshal([]byte(body), &other); err != nil {
			t.Fatalf("gateway accepted what a strict case-sensitive reader refuses: %q: %v", body, err)
		}
		if other.Model != req.Model || other.Stream != req.Stream || len(other.Messages) != len(req.Messages) {
			t.Fatalf("readings differ on %q: gateway %q/%v/%d, strict %q/%v/%d", body, req.Model, req.Stream, len(req.Messages), other.Model, other.Stream, len(other.Messages))
		}
		for i := range other.Messages {
			if other.Messages[i].Role != req.Messages[i].Role {
				t.Fatalf("readings differ on messages[%d].role of %q", i, body)
			}
		}
	})
}
