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
		wantErr string // part of the message; "" means accepted
	}{
		{"wrapped", `{"query":{"verb":"review","inputs":["code"],"output_type":"REPORT"}}`, Query{Verb: "review", Inputs: []string{"code"}, OutputType: "REPORT"}, ""},
		{"bare", `{"verb":"review"}`, Query{Verb: "review"}, ""},
		{"repeated query", `{"query":{"verb":"review"},"query":{"verb":"delete"}}`, Query{}, "duplicate"},
		{"repeated verb", `{"query":{"verb":"review","verb":"delete"}}`, Query{}, "duplicate"},
		{"repeated bare verb", `{"verb":"review","verb":"delete"}`, Query{}, "duplicate"},
		{"case variant", `{"query":{"verb":"review","Verb":"delete"}}`, Query{}, "Verb"},
		{"case variant alone", `{"Verb":"delete"}`, Query{}, "Verb"},
		{"case variant of query", `{"Query":{"verb":"delete"}}`, Query{}, "Query"},
		{"unknown field", `{"query":{"verb":"review","owner":"x"}}`, Query{}, "owner"},
		{"invalid UTF-8", "{\"verb\":\"rev\xffiew\"}", Query{}, "UTF-8"},
		{"trailing data", `{"verb":"review"} {}`, Query{}, "invalid"},
		{"empty", `{"query":{}}`, Query{}, "at least one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := decodeQuery([]byte(tc.body))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(q, tc.want) {
					t.Errorf("query %+v, want %+v", q, tc.want)
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
// json v2 reads as the same query.
func FuzzDecodeQuery(f *testing.F) {
	for _, s := range []string{
		`{"query":{"verb":"review","inputs":["code"],"output_type":"REPORT"}}`, `{"verb":"x"}`,
		`{"query":{"verb":"a","verb":"b"}}`, `{"Verb":"x"}`, `{"query":{"verb":"\u0061"}}`, `{"inputs":[]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		q, err := decodeQuery([]byte(body))
		if err != nil {
			return
		}
		var w struct {
			Query *Query `json:"query"`
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
		if want.Verb != q.Verb || want.OutputType != q.OutputType || strings.Join(want.Inputs, "\x00") != strings.Join(q.Inputs, "\x00") {
			t.Fatalf("%q: decodeQuery %+v, json v2 %+v", body, q, want)
		}
	})
}
