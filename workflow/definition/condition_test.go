package definition

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// decode turns JSON text into the value Eval receives, with numbers as
// json.Number (useNumber) or float64, as the two decoders of the gateway do.
func decode(t *testing.T, s string, useNumber bool) any {
	t.Helper()
	if s == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	if useNumber {
		dec.UseNumber()
	}
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("bad test JSON %q: %v", s, err)
	}
	return v
}

func TestConditionEval(t *testing.T) {
	cases := []struct {
		name          string
		expr          string
		resp, in, ctx string // JSON
		want          bool
	}{
		{"status equal", `response.status == "success"`, `{"status":"success"}`, ``, ``, true},
		{"status differs", `response.status == "success"`, `{"status":"failure"}`, ``, ``, false},
		{"score above", `response.data.score > 0.8`, `{"data":{"score":0.9}}`, ``, ``, true},
		{"score below", `response.data.score > 0.8`, `{"data":{"score":0.5}}`, ``, ``, false},
		{"integer equal", `response.data.count == 3`, `{"data":{"count":3}}`, ``, ``, true},
		{"integer not equal", `response.data.count == 3`, `{"data":{"count":4}}`, ``, ``, false},
		{"missing path is undefined", `response.data.nope == 1`, `{"data":{}}`, ``, ``, false},
		{"missing path negated", `response.data.nope != 1`, `{"data":{}}`, ``, ``, false},
		{"null response", `response.status == "success"`, ``, ``, ``, false},
		{"count non-empty", `count(response.data.guesses) > 0`, `{"data":{"guesses":["a@x"]}}`, ``, ``, true},
		{"count empty", `count(response.data.guesses) > 0`, `{"data":{"guesses":[]}}`, ``, ``, false},
		{"some in, one matches", `some x in response.data.items; x > 3`, `{"data":{"items":[1,5]}}`, ``, ``, true},
		{"some in, none matches", `some x in response.data.items; x > 3`, `{"data":{"items":[1,2]}}`, ``, ``, false},
		{"body both hold", `count(response.data.guesses) > 0; input.strict == true`, `{"data":{"guesses":["a"]}}`, `{"strict":true}`, ``, true},
		{"body second fails", `count(response.data.guesses) > 0; input.strict == true`, `{"data":{"guesses":["a"]}}`, `{"strict":false}`, ``, false},
		{"body first fails", `response.status == "x"; input.strict == true`, `{"status":"y"}`, `{"strict":true}`, ``, false},
		{"non-boolean value is true", `response.data.name`, `{"data":{"name":"acme"}}`, ``, ``, true},
		{"zero is true", `response.data.n`, `{"data":{"n":0}}`, ``, ``, true},
		{"false value is false", `response.data.ok`, `{"data":{"ok":false}}`, ``, ``, false},
		{"true value is true", `response.data.ok`, `{"data":{"ok":true}}`, ``, ``, true},
		{"not false", `not response.data.ok`, `{"data":{"ok":false}}`, ``, ``, true},
		{"context", `context.vendor.name == "acme"`, ``, ``, `{"vendor":{"name":"acme"}}`, true},
		{"input in a ref index", `response.data.scores[input.key] > 1`, `{"data":{"scores":{"a":2}}}`, `{"key":"a"}`, ``, true},
		{"local assignment", `s := response.data.score; s >= 0.5`, `{"data":{"score":0.5}}`, ``, ``, true},
		{"assigning false holds", `s := response.data.ok`, `{"data":{"ok":false}}`, ``, ``, true},
		{"comprehension", `count([g | some g in response.data.guesses; endswith(g, context.domain)]) == 1`, `{"data":{"guesses":["a@x.com","b@y.com"]}}`, ``, `{"domain":"@x.com"}`, true},
		{"every holds", `every x in response.data.items { x > 0 }`, `{"data":{"items":[1,2]}}`, ``, ``, true},
		{"every fails", `every x in response.data.items { x > 1 }`, `{"data":{"items":[1,2]}}`, ``, ``, false},
		{"wildcard", `response.data.items[_] == 2`, `{"data":{"items":[1,2]}}`, ``, ``, true},
		{"comment", `response.status == "ok" # routed on status`, `{"status":"ok"}`, ``, ``, true},
	}
	for _, c := range cases {
		for _, useNumber := range []bool{true, false} {
			name := c.name + "/float64"
			if useNumber {
				name = c.name + "/json.Number"
			}
			t.Run(name, func(t *testing.T) {
				cond, err := CompileCondition(c.expr)
				if err != nil {
					t.Fatalf("CompileCondition(%q): %v", c.expr, err)
				}
				got, err := cond.Eval(context.Background(), decode(t, c.resp, useNumber), decode(t, c.in, useNumber), decode(t, c.ctx, useNumber))
				if err != nil {
					t.Fatalf("Eval: %v", err)
				}
				if got != c.want {
					t.Errorf("Eval(%q) = %v, want %v", c.expr, got, c.want)
				}
			})
		}
	}
}

// TestConditionEvalExactNumber shows that json.Number reaches Rego
// exactly: 2^53+1 survives, where float64 decoding would round it.
func TestConditionEvalExactNumber(t *testing.T) {
	c, err := CompileCondition(`response.id == 9007199254740993`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{{"9007199254740993", true}, {"9007199254740992", false}} {
		got, err := c.Eval(context.Background(), map[string]any{"id": json.Number(tc.id)}, nil, nil)
		if err != nil || got != tc.want {
			t.Errorf("id %s: Eval = %v, %v; want %v", tc.id, got, err, tc.want)
		}
	}
}

func TestCompileConditionErrors(t *testing.T) {
	cases := []struct {
		expr, msg string
	}{
		{``, "empty condition"},
		{`   `, "empty condition"},
		{`response.status ==`, "syntax error"},
		{`package foo`, "syntax error"},
		{`data.x == 1`, "data is not available"},
		{`data.lib.f(response)`, "data is not available"},
		{`count([x | some x in data.items]) > 0`, "data is not available"},
		{`foo == 1`, `unknown name "foo": a condition reads response, input and context`},
		{`x = 1`, `unknown name "x"`},
		{`response.data.items[i] > 1`, `unknown name "i"`},
		{`count([y | y := foo]) > 0`, `unknown name "foo"`},
		{`startswith(bar, "x")`, `unknown name "bar"`},
		{`response := 1`, "response cannot be assigned"},
		{`some input in response.items`, "input cannot be assigned"},
		{`every context in response.items { true }`, "context cannot be assigned"},
		{`response.a == 1 with input as {}`, "with modifiers are not allowed"},
		{`http.send({"method": "get", "url": "http://x"}).status_code == 200`, "function http.send is not allowed"},
		{`count(net.lookup_ip_addr("example.com")) > 0`, "function net.lookup_ip_addr is not allowed"},
		{`opa.runtime().env.HOME == "x"`, "function opa.runtime is not allowed"},
		{`time.now_ns() > 0`, "function time.now_ns is not allowed"},
		{`rand.intn("x", 10) > 1`, "function rand.intn is not allowed"},
		{`uuid.rfc4122("x") != ""`, "function uuid.rfc4122 is not allowed"},
		{`trace("x")`, "function trace is not allowed"},
		{`print(response)`, "function print is not allowed"},
		{`[x | x := time.now_ns()]`, "function time.now_ns is not allowed"},
		{`nosuchfunction(response)`, "undefined function nosuchfunction"},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			cond, err := CompileCondition(c.expr)
			if err == nil {
				t.Fatalf("CompileCondition(%q) = %v, want an error containing %q", c.expr, cond, c.msg)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("CompileCondition(%q) error = %q, want it to contain %q", c.expr, err, c.msg)
			}
		})
	}
}

func TestConditionString(t *testing.T) {
	src := `response.status == "success"`
	c, err := CompileCondition(src)
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != src {
		t.Errorf("String() = %q, want %q", c.String(), src)
	}
	var nilCond *Condition
	if nilCond.String() != "" {
		t.Error("nil Condition has a non-empty String()")
	}
	if ok, err := nilCond.Eval(context.Background(), nil, nil, nil); !ok || err != nil {
		t.Errorf("nil Condition Eval = %v, %v; want true (an edge without when)", ok, err)
	}
}

func TestConditionEvalExpiredContext(t *testing.T) {
	c, err := CompileCondition(`response.status == "success"`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	ok, err := c.Eval(ctx, map[string]any{"status": "success"}, nil, nil)
	if err == nil || ok {
		t.Fatalf("Eval with an expired context = %v, %v; want an error", ok, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v is not context.DeadlineExceeded", err)
	}
}

// TestConditionConcurrent runs one prepared condition from many goroutines:
// the engine shares a Workflow between runs (run with -race).
func TestConditionConcurrent(t *testing.T) {
	c, err := CompileCondition(`response.data.n > 5`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Eval(context.Background(), map[string]any{"data": map[string]any{"n": float64(i)}}, nil, nil)
			if err != nil {
				errs <- err
				return
			}
			if got != (i > 5) {
				errs <- errors.New("wrong result")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
