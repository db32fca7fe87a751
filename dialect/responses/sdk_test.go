package responses

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/packages/respjson"
	"github.com/openai/openai-go/packages/ssestream"
	"github.com/openai/openai-go/responses"
)

// checkRequired holds a value the openai-go SDK decoded to its types: every
// member they mark required is there (null counts: the SDK reads it), and
// no member was of a type the SDK could not read, at any depth (in the
// objects that are there).
func checkRequired(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			checkRequired(t, v.Index(i), path+"["+strconv.Itoa(i)+"]")
		}
		return
	case reflect.Struct:
	default:
		return
	}
	meta := v.FieldByName("JSON")
	if !meta.IsValid() || meta.Kind() != reflect.Struct {
		return
	}
	typ := v.Type()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		if f.Name == "JSON" || tag == "-" || !f.IsExported() {
			continue
		}
		m := meta.FieldByName(f.Name)
		if !m.IsValid() {
			continue
		}
		field, ok := m.Interface().(respjson.Field)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		raw := field.Raw()
		if strings.Contains(tag, ",required") && raw == "" {
			t.Errorf("%s.%s: required by openai-go, missing", path, name)
		}
		if raw != "" && raw != respjson.Null && !field.Valid() {
			t.Errorf("%s.%s: openai-go cannot read %s", path, name, raw)
		}
		if raw != "" && raw != respjson.Null {
			// A nested object's members are required only when it is there.
			checkRequired(t, v.Field(i), path+"."+name)
		}
	}
}

// checkResponse holds a Response object to the SDK's types, its items too.
func checkResponse(t *testing.T, r *responses.Response, path string) {
	t.Helper()
	checkRequired(t, reflect.ValueOf(*r), path)
	for i, item := range r.Output {
		p := path + ".output[" + strconv.Itoa(i) + "]"
		switch item.Type {
		case "message":
			m := item.AsMessage()
			checkRequired(t, reflect.ValueOf(m), p)
			for j, c := range m.Content {
				switch c.Type {
				case "output_text":
					checkRequired(t, reflect.ValueOf(c.AsOutputText()), p+".content")
				case "refusal":
					checkRequired(t, reflect.ValueOf(c.AsRefusal()), p+".content")
				default:
					t.Errorf("%s.content[%d]: type %q", p, j, c.Type)
				}
			}
		case "function_call":
			checkRequired(t, reflect.ValueOf(item.AsFunctionCall()), p)
		default:
			t.Errorf("%s: type %q", p, item.Type)
		}
	}
}

// TestSDKResponse: the official Go SDK reads what Response writes.
func TestSDKResponse(t *testing.T) {
	for _, tc := range []struct {
		name, chat string
		status     responses.ResponseStatus
		text       string
	}{
		{"text fixture", string(readFile(t, filepath.Join("response", "text.json"))), "completed", "The capital of France is Paris."},
		{"tool_calls fixture", string(readFile(t, filepath.Join("response", "tool_calls.json"))), "completed", "I'll check both cities."},
		{"refusal, incomplete, no usage", `{"id":"chatcmpl-1","created":1,"model":"m","choices":[{"index":0,"message":{"content":"Par","refusal":"No."},"finish_reason":"length"}]}`, "incomplete", "Par"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Response([]byte(tc.chat))
			if err != nil {
				t.Fatal(err)
			}
			var r responses.Response
			if err := r.UnmarshalJSON(out); err != nil {
				t.Fatalf("openai-go: %v\n%s", err, out)
			}
			checkResponse(t, &r, "response")
			if r.Status != tc.status || r.OutputText() != tc.text || !strings.HasPrefix(r.ID, "resp_") {
				t.Errorf("status %q, output text %q, id %q", r.Status, r.OutputText(), r.ID)
			}
		})
	}
	out, err := Response(readFile(t, filepath.Join("response", "tool_calls.json")))
	if err != nil {
		t.Fatal(err)
	}
	var r responses.Response
	if err := r.UnmarshalJSON(out); err != nil {
		t.Fatal(err)
	}
	fc := r.Output[2].AsFunctionCall()
	if fc.CallID != "call_B2" || fc.Name != "get_weather" || fc.Arguments != `{"city":"Rome"}` {
		t.Errorf("function call %+v", fc)
	}
	if r.Usage.InputTokens != 2048 || r.Usage.InputTokensDetails.CachedTokens != 1920 || r.Usage.OutputTokens != 212 ||
		r.Usage.OutputTokensDetails.ReasoningTokens != 128 || r.Usage.TotalTokens != 2260 {
		t.Errorf("usage %+v", r.Usage)
	}
}

// TestSDKStream: the official Go SDK's stream reader reads what Stream
// writes, keep-alive comments included, event by event, up to the final
// response.
func TestSDKStream(t *testing.T) {
	for _, tc := range []struct {
		name, model, last string
		text              string
	}{
		{"text", "gpt-4.1", "response.completed", "Paris is the capital of France. 🇫🇷"},
		{"tool_calls", "", "response.completed", "Checking both."},
		{"error", "gpt-4.1", "response.failed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := feedWhole(t, tc.model, readFile(t, filepath.Join("stream", tc.name+".openai.sse")))
			res := &http.Response{
				StatusCode: 200,
				Header:     http.Header{"Content-Type": []string{"text/event-stream"}},
				Body:       io.NopCloser(bytes.NewReader(out)),
			}
			stream := ssestream.NewStream[responses.ResponseStreamEventUnion](ssestream.NewDecoder(res), nil)
			var types []string
			var final responses.Response
			for stream.Next() {
				e := stream.Current()
				types = append(types, e.Type)
				p := e.Type
				var v any
				switch e.Type {
				case "response.created":
					v = e.AsResponseCreated()
				case "response.in_progress":
					v = e.AsResponseInProgress()
				case "response.output_item.added":
					v = e.AsResponseOutputItemAdded()
				case "response.output_item.done":
					v = e.AsResponseOutputItemDone()
				case "response.content_part.added":
					v = e.AsResponseContentPartAdded()
				case "response.content_part.done":
					v = e.AsResponseContentPartDone()
				case "response.output_text.delta":
					v = e.AsResponseOutputTextDelta()
				case "response.output_text.done":
					v = e.AsResponseOutputTextDone()
				case "response.function_call_arguments.delta":
					v = e.AsResponseFunctionCallArgumentsDelta()
				case "response.function_call_arguments.done":
					v = e.AsResponseFunctionCallArgumentsDone()
				case "error":
					v = e.AsError()
				case "response.completed":
					c := e.AsResponseCompleted()
					final = c.Response
					v = c
				case "response.failed":
					f := e.AsResponseFailed()
					final = f.Response
					v = f
				default:
					t.Fatalf("unexpected event %q", e.Type)
				}
				checkRequired(t, reflect.ValueOf(v), p)
				if int(e.SequenceNumber) != len(types)-1 {
					t.Errorf("%s: sequence_number %d, want %d", e.Type, e.SequenceNumber, len(types)-1)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("openai-go: %v after %v", err, types)
			}
			if len(types) == 0 || types[len(types)-1] != tc.last {
				t.Fatalf("events %v, want the last %s", types, tc.last)
			}
			checkResponse(t, &final, tc.last+".response")
			if final.OutputText() != tc.text {
				t.Errorf("output text %q, want %q", final.OutputText(), tc.text)
			}
			if tc.last == "response.failed" && (final.Error.Message == "" || final.Status != "failed") {
				t.Errorf("failed response %+v", final)
			}
			if tc.name != "error" && (final.Usage.InputTokens == 0 || final.Usage.TotalTokens == 0) {
				t.Errorf("usage %+v", final.Usage)
			}
		})
	}
}
