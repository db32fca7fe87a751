package proxy

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/redact"
)

// chunkSeeds are chunks of the shapes providers send, and near misses.
var chunkSeeds = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" bob@example.com"},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`,
	`{"usage":null,"id":"c","choices":[{"index":1,"delta":{"content":"call +1 555 123 4567\n","refusal":null},"finish_reason":"length"},{"index":0,"delta":{"reasoning_content":"ok"},"finish_reason":null}]}`,
	` { "id" : "c\u0041" , "model":"m@x", "choices" : [ { "delta" : { "content" : "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789" } , "index" : 0 } ] } `,
	`{"id":"c","choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}`,
	`{"id":"c","Model":"m","choices":[]}`,
	`{"id":"c","choices":[],"id":"d"}`,
	`{"id":"c","choices":[{"index":0,"index":1,"delta":{}}]}`,
	`{"id":"c","choices":[],"usage":{"total_tokens":1,"total_tokens":2}}`,
	`{"id":"c","choices":[{"index":"0","delta":{"content":"a"}}]}`,
	`{"id":"c","choices":[{"delta":{"content":"a"}}]}`,
	`{"id":"c","created":1e3,"choices":[]}`,
	`{"id":"c","created":01,"choices":[]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]}}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"content":"\ud800"}}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"content":"` + "\xff" + `"}}]}`,
	`{"id":"c","choices":[]} x`,
	`{"id":"c","choices":[],}`,
	`{}`,
	`[]`,
	``,
}

// FuzzChunkReader holds the one-pass reader to the general way: for every
// sequence of chunks, with and without the usage hidden, the same chunks
// are refused, and for the others the same bytes go out with the same
// usage, the same blocks and the same release notes (the general way's
// read from what it sends), and the stream's redaction ends the same.
func FuzzChunkReader(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Add([]byte(chunkSeeds[0]+"\x1e"+chunkSeeds[1]+"\x1e"+chunkSeeds[2]), true)
	r, err := redact.New(redact.Config{Detectors: redact.Names(), Block: []string{"api_key"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte, hide bool) {
		fast, general := newChunkScanner(r), newChunkScanner(r)
		fast.hideUsage, general.hideUsage = hide, hide
		general.general = true
		for _, data := range bytes.SplitN(in, []byte{0x1e}, 4) {
			got, gerr := fast.event(data)
			want, werr := general.event(data)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("%q: one-pass error %v, general %v", data, gerr, werr)
			}
			if werr != nil {
				return
			}
			if !bytes.Equal(got.out, want.out) || got.blocked != want.blocked || got.usageOnly != want.usageOnly || !reflect.DeepEqual(got.usage, want.usage) {
				t.Fatalf("%q:\none-pass %q (blocked %v, usage %+v only %v)\ngeneral  %q (blocked %v, usage %+v only %v)",
					data, got.out, got.blocked, got.usage, got.usageOnly, want.out, want.blocked, want.usage, want.usageOnly)
			}
			if got.noted {
				if want := notesOf(want.out); got.notes.content != want.content || !slices.Equal(got.notes.finish, want.finish) {
					t.Fatalf("%q: notes %+v, read from the output %+v", data, got.notes, want)
				}
			}
			if got.blocked {
				return
			}
		}
		if fast.id != general.id || fast.model != general.model || fast.created != general.created {
			t.Fatalf("last chunk's id, model, created: %q %q %d, general %q %q %d", fast.id, fast.model, fast.created, general.id, general.model, general.created)
		}
		gotTail, gotBlocked := fast.flush()
		wantTail, wantBlocked := general.flush()
		if !bytes.Equal(gotTail, wantTail) || gotBlocked != wantBlocked || !reflect.DeepEqual(fast.result(), general.result()) {
			t.Fatalf("end: %q %v %+v, general %q %v %+v", gotTail, gotBlocked, fast.result(), wantTail, wantBlocked, general.result())
		}
	})
}

// notesOf is what the release notes read from out.
func notesOf(out []byte) chunkNotes {
	var n chunkNotes
	f := &sseFilter{onRelease: func(content bool, finish []string) { n = chunkNotes{content: content, finish: finish} }}
	f.released(out)
	return n
}

// The chunks of a common stream take the one pass: the benchmark's
// figures are the reader's, not the general way's.
func TestChunkReaderReadsCommonChunks(t *testing.T) {
	var r chunkReader
	for _, ev := range bytes.Split(bytes.TrimSpace(benchStream()), []byte("\n\n")) {
		data := bytes.TrimPrefix(ev, []byte("data: "))
		if string(data) == "[DONE]" {
			continue
		}
		if !r.read(data) {
			t.Errorf("not read in one pass: %s", data)
		}
	}
	for _, s := range chunkSeeds[:5] {
		if !r.read([]byte(s)) {
			t.Errorf("not read in one pass: %s", s)
		}
	}
}

// TestChunkReaderAgreesOnGenerated runs the fuzz target's comparison on
// generated chunks of the common shape (members shuffled, whitespace,
// escapes, secrets split across chunks, null and string fields), most of
// which the one pass reads: the mutations of the fuzzer mostly fall to the
// general way.
func TestChunkReaderAgreesOnGenerated(t *testing.T) {
	r, err := redact.New(redact.Config{Detectors: redact.Names(), Block: []string{"api_key"}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 26))
	texts := []string{"a", "Hello", " bob@exa", "mple.com", ` "quoted"`, `line\nbreak`, `\u00e9t\u00e9`, " +1 555", " 123 4567", "", " 4111 1111", " 1111 1111", "é", " sk-proj-abcdefghijkl", "mnopqrstuvwxyz0123456789"}
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	ws := func() string { return pick("", "", "", " ", "\t", "  ") }
	obj := func(members []string) string {
		rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		return "{" + ws() + strings.Join(members, ws()+","+ws()) + ws() + "}"
	}
	str := func(s string) string { return `"` + s + `"` }
	var read, all int
	for n := 0; n < 3000; n++ {
		var events []string
		for e := 0; e < 1+rng.IntN(4); e++ {
			var choices []string
			for c := 0; c < rng.IntN(3); c++ {
				var delta []string
				if rng.IntN(3) == 0 {
					delta = append(delta, `"role":`+str(pick("assistant", "tool user")))
				}
				for _, f := range []string{"content", "refusal", "reasoning_content", "reasoning"} {
					if rng.IntN(3) == 0 {
						delta = append(delta, `"`+f+`":`+pick("null", str(pick(texts...)), str(pick(texts...))))
					}
				}
				members := []string{`"index":` + pick("0", "1"), `"delta":` + obj(delta)}
				if rng.IntN(2) == 0 {
					members = append(members, `"finish_reason":`+pick("null", `"stop"`, `"length"`, `"a b"`, `""`))
				}
				if rng.IntN(4) == 0 {
					members = append(members, `"logprobs":null`)
				}
				choices = append(choices, obj(members))
			}
			members := []string{`"choices":[` + strings.Join(choices, ",") + "]"}
			for _, m := range []string{`"id":` + pick(`"chatcmpl-1"`, `"c\u0031"`, `"x@y.z"`), `"object":"chat.completion.chunk"`, `"created":` + pick("0", "1700000000"),
				`"model":` + pick(`"m"`, `"gpt 4"`), `"system_fingerprint":` + pick("null", `"fp_1"`), `"service_tier":` + pick("null", `"default"`),
				`"usage":` + pick("null", `{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}`, `{"total_tokens":3}`)} {
				if rng.IntN(2) == 0 {
					members = append(members, m)
				}
			}
			events = append(events, ws()+obj(members)+ws())
		}
		for _, hide := range []bool{false, true} {
			fast, general := newChunkScanner(r), newChunkScanner(r)
			fast.hideUsage, general.hideUsage = hide, hide
			general.general = true
			var cr chunkReader
			for _, ev := range events {
				all++
				if cr.read([]byte(ev)) {
					read++
				}
				got, gerr := fast.event([]byte(ev))
				want, werr := general.event([]byte(ev))
				if (gerr == nil) != (werr == nil) || !bytes.Equal(got.out, want.out) || got.blocked != want.blocked || !reflect.DeepEqual(got.usage, want.usage) {
					t.Fatalf("%s (hide %v):\none-pass %q %v\ngeneral  %q %v", ev, hide, got.out, gerr, want.out, werr)
				}
				if w := notesOf(want.out); got.noted && (got.notes.content != w.content || !slices.Equal(got.notes.finish, w.finish)) {
					t.Fatalf("%s: notes %+v, read from the output %+v", ev, got.notes, w)
				}
				if got.blocked || gerr != nil {
					break
				}
			}
			gotTail, _ := fast.flush()
			wantTail, _ := general.flush()
			if !bytes.Equal(gotTail, wantTail) || !reflect.DeepEqual(fast.result(), general.result()) {
				t.Fatalf("%q: end %q %+v, general %q %+v", events, gotTail, fast.result(), wantTail, general.result())
			}
		}
	}
	if read < all*9/10 {
		t.Errorf("the one pass read %d of %d generated chunks", read, all)
	}
}
