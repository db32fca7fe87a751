package redact

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// streamChunks writes chunks to a new Stream and returns the pieces it
// emitted, the Flush output last.
func streamChunks(r *Redactor, chunks ...string) (pieces []string, st *Stream) {
	st = r.Stream()
	for _, c := range chunks {
		pieces = append(pieces, st.Write(c))
	}
	return append(pieces, st.Flush()), st
}

// checkSplit asserts the stream invariant for one split of text.
func checkSplit(t *testing.T, r *Redactor, text, want string, wantRes Result, chunks ...string) {
	t.Helper()
	pieces, st := streamChunks(r, chunks...)
	if got := strings.Join(pieces, ""); got != want {
		t.Fatalf("stream of %q split as %q\n got %q\nwant %q", text, chunks, got, want)
	}
	if got := st.Result(); !maps.Equal(got.Counts, wantRes.Counts) || got.Blocked != wantRes.Blocked {
		t.Fatalf("stream of %q split as %q: Result %+v, String's %+v", text, chunks, got, wantRes)
	}
}

// TestStreamEverySplit is the key invariant: for any split of a text into
// chunks, the concatenated output equals String of the whole text. Every
// corpus text is split at every byte position, and the shorter ones into
// three chunks at every pair of positions.
func TestStreamEverySplit(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	for _, text := range corpus() {
		want, res := r.String(text)
		checkSplit(t, r, text, want, res, text)
		for i := 0; i <= len(text); i++ {
			checkSplit(t, r, text, want, res, text[:i], text[i:])
		}
		if len(text) <= 120 {
			for i := 0; i <= len(text); i++ {
				for j := i; j <= len(text); j++ {
					checkSplit(t, r, text, want, res, text[:i], text[i:j], text[j:])
				}
			}
		}
	}
}

func TestStreamByteByByte(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	for _, text := range corpus() {
		want, res := r.String(text)
		chunks := make([]string, len(text))
		for i := range text {
			chunks[i] = text[i : i+1]
		}
		checkSplit(t, r, text, want, res, chunks...)
	}
}

func TestStreamRandomSplits(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	rng := rand.New(rand.NewPCG(1, 2))
	text := prose(20 << 10)
	want, res := r.String(text)
	for range 50 {
		checkSplit(t, r, text, want, res, randomSplit(rng, text, 40)...)
	}
}

// randomSplit cuts text into chunks of 1 to 2*mean bytes.
func randomSplit(rng *rand.Rand, text string, mean int) []string {
	var chunks []string
	for len(text) > 0 {
		n := min(len(text), 1+rng.IntN(2*mean))
		chunks, text = append(chunks, text[:n]), text[n:]
	}
	return chunks
}

func TestStreamEmailAcrossChunks(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	pieces, st := streamChunks(r, "Reach me at jane.do", "e@exam", "ple.org today.")
	got := strings.Join(pieces, "")
	if got != "Reach me at "+rEmail+" today." {
		t.Errorf("got %q", got)
	}
	for _, p := range pieces {
		if strings.Contains(p, "jane") || strings.Contains(p, "exam") {
			t.Errorf("piece %q shows part of the address", p)
		}
	}
	if st.Result().Counts["email"] != 1 {
		t.Errorf("Result %+v", st.Result())
	}
}

// TestStreamEmitsEarly checks that the hold-back is short: clean text is
// released as soon as its last word is complete.
func TestStreamEmitsEarly(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	st := r.Stream()
	if got := st.Write("Hello there, how "); got != "Hello there, how " {
		t.Errorf("first Write = %q", got)
	}
	if got := st.Write("are yo"); got != "are " {
		t.Errorf("second Write = %q, want the word still being written held back", got)
	}
	if got := st.Flush(); got != "yo" {
		t.Errorf("Flush = %q", got)
	}
}

// TestStreamBlocked checks that a blocked value never shows: for every
// split, what was emitted is a prefix of the text before the value, and
// nothing is emitted after.
func TestStreamBlocked(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names(), Block: []string{"credit_card", "api_key"}})
	for _, tc := range []struct{ text, before, name string }{
		{"Pay with 4111 1111 1111 1111 tomorrow, thanks.", "Pay with ", "credit_card"},
		{"token: " + keyOpenAI + " (rotate it)", "token: ", "api_key"},
		{"ok a@b.co then 4111111111111111", "ok " + rEmail + " then ", "credit_card"}, // masked, then blocked
	} {
		for i := 0; i <= len(tc.text); i++ {
			for _, chunks := range [][]string{{tc.text[:i], tc.text[i:]}, {tc.text[:i/2], tc.text[i/2 : i], tc.text[i:]}} {
				pieces, st := streamChunks(r, chunks...)
				got := strings.Join(pieces, "")
				if !st.Blocked() {
					t.Fatalf("%q split as %q: not blocked", tc.text, chunks)
				}
				if st.Result().Blocked != tc.name {
					t.Fatalf("Blocked = %q, want %q", st.Result().Blocked, tc.name)
				}
				if !strings.HasPrefix(tc.before, got) {
					t.Fatalf("%q split as %q: emitted %q, not a prefix of %q", tc.text, chunks, got, tc.before)
				}
				if strings.Contains(got, "4111") || strings.Contains(got, keyOpenAI[:8]) {
					t.Fatalf("%q split as %q: emitted %q", tc.text, chunks, got)
				}
				if st.Write("more text") != "" || st.Flush() != "" {
					t.Fatal("a blocked stream still emits")
				}
			}
		}
	}
}

// TestStreamLongToken covers tokens longer than MaxValueLen: the stream
// replaces each once it is sure, drops the rest of its run, and keeps the
// hold-back bounded. For these the output still equals String's.
func TestStreamLongToken(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	body := strings.Repeat("Ab3dEf6hIj9kLm2n", 3*MaxValueLen/16)
	for _, tc := range []struct{ text, want string }{
		{"header " + jwtHS256[:40] + "." + body + "." + body[:300] + " trailer", "header " + rJWT + " trailer"},
		{"api_key=" + body + "\nnext line", "api_key=" + rKey + "\nnext line"},
		{"key " + keyOpenAIPrj + body + ", done", "key " + rKey + ", done"},
	} {
		if got, _ := r.String(tc.text); got != tc.want {
			t.Fatalf("String = %.80q…", got)
		}
		for _, size := range []int{1, 7, 100, 5000} {
			st := r.Stream()
			var out strings.Builder
			for i := 0; i < len(tc.text); i += size {
				out.WriteString(st.Write(tc.text[i:min(i+size, len(tc.text))]))
				if kept := len(st.buf) - st.from; kept > MaxValueLen+lookBehind+size {
					t.Fatalf("chunk size %d: holding back %d bytes", size, kept)
				}
			}
			out.WriteString(st.Flush())
			if got := out.String(); got != tc.want {
				t.Errorf("chunk size %d: got %.120q…, want %q", size, got, tc.want)
			}
		}
	}
}

// TestStreamHoldBounded streams texts with no values but long stretches
// that look like the start of one, byte by byte, and checks the hold-back:
// short where spaces break the text, and never over the hard bound.
func TestStreamHoldBounded(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	for _, tc := range []struct {
		text  string
		limit int
	}{
		{strings.Repeat("1 ", 5000), 64},              // digit groups
		{strings.Repeat("4111 ", 3000) + "4111", 64},  // card groups
		{strings.Repeat("x@", 5000), 64},              // empty domains
		{strings.Repeat("(1 ", 3000), 64},             // phone starts
		{"token: " + strings.Repeat("ab ", 3000), 64}, // short secrets
		{strings.Repeat("a", 10000), maxLocal},        // one long local part
		{"+" + strings.Repeat("9", 10000), maxLocal},  // an endless phone, or local part
		{"a@" + strings.Repeat("b", 10000) + ".com", maxLocal},
		{strings.Repeat("1.", 5000), maxLocal},
		{"DE" + strings.Repeat("0", 10000), maxLocal},
		{"AKIA" + strings.Repeat("A", 10000), maxLocal},
		{"token: " + strings.Repeat("ab/", 7000), 2 * secretSample}, // a low-entropy secret run
	} {
		st := r.Stream()
		maxKept := 0
		for i := 0; i < len(tc.text); i++ {
			st.Write(tc.text[i : i+1])
			maxKept = max(maxKept, len(st.buf)-st.from)
		}
		st.Flush()
		if maxKept > tc.limit {
			t.Errorf("%.20q…: held back up to %d bytes, want at most %d", tc.text, maxKept, tc.limit)
		}
	}
}

// TestConcurrentUse shares one Redactor between goroutines, as the proxy
// does; run with -race.
func TestConcurrentUse(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	texts := corpus()
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i, text := range texts {
				want, _ := r.String(text)
				st := r.Stream()
				got := st.Write(text[:len(text)/2]) + st.Write(text[len(text)/2:]) + st.Flush()
				if got != want {
					t.Errorf("goroutine %d, text %d: stream %q, String %q", g, i, got, want)
				}
				doc, _ := json.Marshal(map[string]string{"message": text})
				if _, _, err := r.JSON(doc); err != nil {
					t.Errorf("JSON: %v", err)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
}

func TestStreamFlushStartsAgain(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	st := r.Stream()
	first := st.Write("mail a@b.") + st.Flush()
	second := st.Write("co now") + st.Flush()
	if first != "mail a@b." || second != "co now" {
		t.Errorf("got %q then %q: Flush must end the text", first, second)
	}
}

// FuzzStream splits the input at random points: the output must equal
// String of the whole input, and with every detector blocking, what is
// emitted must be a prefix of the text before the first detected value.
func FuzzStream(f *testing.F) {
	for _, text := range corpus() {
		f.Add(text, uint64(len(text)))
	}
	r := mustNew(f, Config{Detectors: Names()})
	blocking := mustNew(f, Config{Detectors: Names(), Block: Names()})
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		if len(text) > MaxValueLen {
			t.Skip("exact only up to MaxValueLen")
		}
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		chunks := randomSplit(rng, text, 1+int(seed%16))
		want, res := r.String(text)
		checkSplit(t, r, text, want, res, chunks...)

		pieces, st := streamChunks(blocking, chunks...)
		got := strings.Join(pieces, "")
		var sc scanner
		sc.reset(text, 0, true, &r.on)
		sc.scan()
		if len(sc.cands) == 0 {
			if got != text || st.Blocked() {
				t.Fatalf("no value in %q, yet the blocking stream emitted %q (blocked %v)", text, got, st.Blocked())
			}
			return
		}
		if first := sc.cands[0].start; !strings.HasPrefix(text[:first], got) || !st.Blocked() {
			t.Fatalf("blocking stream of %q emitted %q past the first value at %d (blocked %v)", text, got, first, st.Blocked())
		}
	})
}

// BenchmarkStream streams realistic text in chunks of a typical SSE delta;
// ns/chunk is the cost added to each chunk.
func BenchmarkStream(b *testing.B) {
	r := mustNew(b, Config{Detectors: Names()})
	text := prose(64 << 10)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, mean := range []int{20, 60} {
		chunks := randomSplit(rng, text, mean)
		b.Run("chunk"+strconv.Itoa(mean), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				st := r.Stream()
				for _, c := range chunks {
					st.Write(c)
				}
				st.Flush()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(chunks)), "ns/chunk")
		})
	}
}
