package registry

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/internal/apierror"
)

// A query body is read once, strictly: a repeated name or a case variant
// of a known one would let the gateway answer one query while the audited
// bytes say another.
func TestDecodeQuery(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    Query
		topK    int
		wantErr string // part of the message; "" means accepted
	}{
		{"wrapped", `{"query":{"verb":"review","inputs":["code"],"output_type":"REPORT"}}`, Query{Verb: "review", Inputs: []string{"code"}, OutputType: "REPORT"}, 5, ""},
		{"bare", `{"verb":"review"}`, Query{Verb: "review"}, 5, ""},
		{"text, tags and top_k", `{"query":{"text":"find hotels in Paris","tags":["travel","eu"]},"top_k":3}`, Query{Text: "find hotels in Paris", Tags: []string{"travel", "eu"}}, 3, ""},
		{"bare with top_k", `{"text":"hotels","top_k":50}`, Query{Text: "hotels"}, 50, ""},
		{"tags only", `{"query":{"tags":["travel"]}}`, Query{Tags: []string{"travel"}}, 5, ""},
		{"top_k null is the default", `{"query":{"verb":"x"},"top_k":null}`, Query{Verb: "x"}, 5, ""},
		{"top_k 0", `{"query":{"verb":"x"},"top_k":0}`, Query{}, 0, "top_k"},
		{"top_k over the bound", `{"query":{"verb":"x"},"top_k":51}`, Query{}, 0, "top_k"},
		{"top_k not an integer", `{"query":{"verb":"x"},"top_k":2.5}`, Query{}, 0, "top_k"},
		{"top_k a string", `{"query":{"verb":"x"},"top_k":"5"}`, Query{}, 0, "top_k"},
		{"top_k inside the query", `{"query":{"verb":"x","top_k":5}}`, Query{}, 0, "top_k"},
		{"repeated top_k", `{"query":{"verb":"x"},"top_k":5,"top_k":50}`, Query{}, 0, "duplicate"},
		{"case variant of top_k", `{"query":{"verb":"x"},"Top_K":5}`, Query{}, 0, "Top_K"},
		{"something else beside the query", `{"query":{"verb":"x"},"verb":"y"}`, Query{}, 0, "nothing else"},
		{"repeated query", `{"query":{"verb":"review"},"query":{"verb":"delete"}}`, Query{}, 0, "duplicate"},
		{"repeated verb", `{"query":{"verb":"review","verb":"delete"}}`, Query{}, 0, "duplicate"},
		{"repeated text", `{"query":{"text":"a","text":"b"}}`, Query{}, 0, "duplicate"},
		{"repeated bare verb", `{"verb":"review","verb":"delete"}`, Query{}, 0, "duplicate"},
		{"case variant", `{"query":{"verb":"review","Verb":"delete"}}`, Query{}, 0, "Verb"},
		{"case variant of text", `{"query":{"Text":"delete everything"}}`, Query{}, 0, "Text"},
		{"case variant alone", `{"Verb":"delete"}`, Query{}, 0, "Verb"},
		{"case variant of query", `{"Query":{"verb":"delete"}}`, Query{}, 0, "Query"},
		{"unknown field", `{"query":{"verb":"review","owner":"x"}}`, Query{}, 0, "owner"},
		{"invalid UTF-8", "{\"verb\":\"rev\xffiew\"}", Query{}, 0, "UTF-8"},
		{"trailing data", `{"verb":"review"} {}`, Query{}, 0, "invalid"},
		{"empty", `{"query":{}}`, Query{}, 0, "at least one"},
		{"blank text alone", `{"query":{"text":"   "}}`, Query{}, 0, "at least one"},
		{"blank text beside a verb", `{"query":{"text":" ","verb":"x"}}`, Query{}, 0, "blank"},
		{"text too long", `{"query":{"text":"` + strings.Repeat("a", 1025) + `"}}`, Query{}, 0, "1024"},
		{"empty tag", `{"query":{"tags":[""]}}`, Query{}, 0, "Tags"},
		{"tags not strings", `{"query":{"tags":[1]}}`, Query{}, 0, "tags"},
		{"too many tags", `{"query":{"tags":[` + strings.Repeat(`"t",`, 64) + `"t"]}}`, Query{}, 0, "64 tags"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, k, err := decodeQuery([]byte(tc.body))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(q, tc.want) || k != tc.topK {
					t.Errorf("query %+v top_k %d, want %+v %d", q, k, tc.want, tc.topK)
				}
				return
			}
			var ae *apierror.Error
			if !errors.As(err, &ae) || ae.Status != 400 {
				t.Fatalf("err %v, want a 400", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err %q, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzDecodeQuery holds the query reading to json v2's strict one (names
// case-sensitive, repeats refused, valid UTF-8): what decodeQuery accepts,
// json v2 reads as the same query and top_k.
func FuzzDecodeQuery(f *testing.F) {
	for _, s := range []string{
		`{"query":{"verb":"review","inputs":["code"],"output_type":"REPORT"}}`, `{"verb":"x"}`,
		`{"query":{"verb":"a","verb":"b"}}`, `{"Verb":"x"}`, `{"query":{"verb":"\u0061"}}`, `{"inputs":[]}`,
		`{"query":{"text":"find hotels in Paris","tags":["travel"]},"top_k":3}`, `{"text":"x","top_k":50}`,
		`{"query":{"tags":["a","b"]}}`, `{"query":{"text":"x"},"top_k":1e1}`, `{"query":{"text":"x"},"top_k":5.0}`,
		`{"query":{"text":"x"},"top_k":-0}`, `{"query":{"text":"x"},"top_k":null}`, `{"query":null,"top_k":3}`,
		`{"query":{"text":"x"},"Top_k":3}`, `{"text":"x","Tags":["a"]}`, `{"query":{"text":"\ud800"}}`,
		`{"tags":["a"],"tags":["b"]}`, `{"query":{"text":"x","tags":null}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		q, k, err := decodeQuery([]byte(body))
		if err != nil {
			return
		}
		var w struct {
			Query *Query `json:"query"`
			TopK  *int   `json:"top_k"`
		}
		var want Query
		if json.Unmarshal([]byte(body), &w) != nil {
			t.Fatalf("json v2 refuses %q, which decodeQuery accepted as %+v", body, q)
		}
		if w.Query != nil {
			want = *w.Query
		} else if err := json.Unmarshal([]byte(body), &want); err != nil {
			t.Fatalf("json v2 refuses %q as a bare query: %v", body, err)
		}
		wantK := DefaultTopK
		if w.TopK != nil {
			wantK = *w.TopK
		}
		if want.Text != q.Text || want.Verb != q.Verb || want.OutputType != q.OutputType || k != wantK ||
			strings.Join(want.Inputs, "\x00") != strings.Join(q.Inputs, "\x00") || strings.Join(want.Tags, "\x00") != strings.Join(q.Tags, "\x00") {
			t.Fatalf("%q: decodeQuery %+v top_k %d, json v2 %+v top_k %d", body, q, k, want, wantK)
		}
	})
}
