package redact

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		want   string // in the error message
		isName bool   // wraps ErrUnknownDetector
	}{
		{"unknown detector", Config{Detectors: []string{"email", "passport"}}, `"passport"`, true},
		{"repeated detector", Config{Detectors: []string{"email", "email"}}, `"email" listed twice`, false},
		{"unknown block", Config{Detectors: Names(), Block: []string{"credit-card"}}, `"credit-card"`, true},
		// An empty list is "redaction off" everywhere: the caller builds
		// no Redactor rather than one that silently runs every detector.
		{"no detectors", Config{}, "no detectors", false},
		{"empty detectors", Config{Detectors: []string{}}, "no detectors", false},
		{"block not enabled", Config{Detectors: []string{"email"}, Block: []string{"ssn"}}, `"ssn" is not enabled`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil {
				t.Fatal("New succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
			if errors.Is(err, ErrUnknownDetector) != tc.isName {
				t.Errorf("errors.Is(%v, ErrUnknownDetector) = %v, want %v", err, !tc.isName, tc.isName)
			}
		})
	}
}

func TestNamesEnablesAllDetectors(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	for d, on := range r.on {
		if !on {
			t.Errorf("detector %s is off with an empty Config", detectorNames[d])
		}
	}
	if got := Names(); len(got) != int(numDetectors) || got[0] != "email" || got[len(got)-1] != "ipv4" {
		t.Errorf("Names() = %v", got)
	}
}

func TestOnlyEnabledDetectorsRun(t *testing.T) {
	r := mustNew(t, Config{Detectors: []string{"ipv4"}})
	in := "mail a@b.co from 10.0.0.1, card 4111111111111111"
	want := "mail a@b.co from " + rIP + ", card 4111111111111111"
	if got, _ := r.String(in); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestReplacementTemplate(t *testing.T) {
	in := "write to a@b.co or call 555-123-4567"
	for _, tc := range []struct{ tmpl, want string }{
		{"", "write to [REDACTED:email] or call [REDACTED:phone]"},
		{"<{detector}>", "write to <email> or call <phone>"},
		{"***", "write to *** or call ***"},
		{"{detector}/{detector}", "write to email/email or call phone/phone"},
	} {
		r := mustNew(t, Config{Detectors: Names(), Replacement: tc.tmpl})
		if got, _ := r.String(in); got != tc.want {
			t.Errorf("template %q: got %q, want %q", tc.tmpl, got, tc.want)
		}
	}
}

func TestBlock(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names(), Block: []string{"credit_card", "ssn"}})
	for _, tc := range []struct {
		name, in, want, blocked string
	}{
		{"no match", "hello a@b.co", "hello " + rEmail, ""},
		{"blocking match is still redacted", "card 4111111111111111", "card " + rCard, "credit_card"},
		{"first blocking detector in the text", "ssn 123-45-6789 card 4111111111111111", "ssn " + rSSN + " card " + rCard, "ssn"},
		{"bad luhn does not block", "card 4111111111111112", "card 4111111111111112", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, res := r.String(tc.in)
			if got != tc.want || res.Blocked != tc.blocked {
				t.Errorf("String(%q) = %q, Blocked %q; want %q, Blocked %q", tc.in, got, res.Blocked, tc.want, tc.blocked)
			}
		})
	}
}

func TestResultAddTotal(t *testing.T) {
	var r Result
	if r.Total() != 0 {
		t.Fatal("zero Result has a total")
	}
	r.Add(Result{Counts: map[string]int{"email": 2}})
	r.Add(Result{Counts: map[string]int{"email": 1, "ipv4": 1}, Blocked: "ipv4"})
	r.Add(Result{Blocked: "ssn"})
	if r.Total() != 4 || r.Counts["email"] != 3 || r.Counts["ipv4"] != 1 || r.Blocked != "ipv4" {
		t.Errorf("after Add: %+v, Total %d", r, r.Total())
	}
}

// TestResultHoldsNoValue checks that a Result carries names and counts only.
func TestResultHoldsNoValue(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names(), Block: []string{"email"}})
	_, res := r.String("secret.person@example.com")
	for name := range res.Counts {
		if strings.Contains(name, "secret") {
			t.Errorf("Result.Counts key %q holds the value", name)
		}
	}
	if res.Blocked != "email" {
		t.Errorf("Blocked = %q", res.Blocked)
	}
}

func TestStringUnchangedTextIsNotCopied(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	in := strings.Repeat("nothing personal here. ", 100)
	if n := testing.AllocsPerRun(100, func() { r.String(in) }); n != 0 {
		t.Errorf("String of clean text allocates %v times, want 0", n)
	}
}

// TestIdempotent checks that redacting the output again finds nothing, on
// every table input and on neighbours that differ by a separator.
func TestIdempotent(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	for _, in := range corpus() {
		checkIdempotent(t, r, in)
	}
}

func checkIdempotent(t *testing.T, r *Redactor, in string) {
	t.Helper()
	out, _ := r.String(in)
	again, res := r.String(out)
	if res.Total() != 0 || again != out {
		t.Errorf("redacting again finds more: %q -> %q -> %q", in, out, again)
	}
}

// corpus returns the table inputs plus realistic text, for the stream,
// idempotence and fuzz tests.
func corpus() []string {
	texts := []string{
		"",
		"a",
		"Hello, world.",
		"email john.doe@example.com, phone +44 20 7946 0958, card 4111 1111 1111 1111.",
		"IBAN DE89 3704 0044 0532 0130 00 and SSN 123-45-6789 from 192.168.1.1",
		"Authorization: Bearer " + jwtHS256,
		"export OPENAI_API_KEY=" + keyOpenAIPrj + "\nexport AWS=" + keyAWS,
		`{"api_key": "` + secret20 + `", "user": "a@b.co"}`,
		"1.2.3.4.5 999.1.1.1 2024-01-15 v1.2.3 4111 1111 1111 1112",
		"555-123-4567-10.0.0.1 " + keyAWS + "-555-123-4567",
		"4111111111111111.1.2.3.4 a@b.com+44 20 7946 0958",
	}
	for _, set := range [][]redactCase{emailCases, phoneCases, cardCases, ibanCases, ssnCases, apiKeyCases, jwtCases, ipv4Cases, overlapCases} {
		for _, tc := range set {
			texts = append(texts, tc.in)
		}
	}
	return append(texts, prose(3000))
}

// prose returns about n bytes of text shaped like a model's answer:
// markdown, a code block, numbers that are not personal data, and a few
// values that are.
func prose(n int) string {
	paragraphs := []string{
		"## Summary\n\nThe migration plan covers three services. Version 2.14.3 of the client fixes the retry bug reported on 2024-03-18; deploy it before the 1.2.3.4.5 firmware rollout. ",
		"The on-call engineer, reachable at oncall.team@example.com or +1 (415) 555-0132, confirmed that the staging cluster at 10.20.30.40 is healthy. ",
		"Throughput rose by 12.5% to 3400 requests per second, and p99 latency fell from 310 ms to 180 ms after the cache change (see ticket OPS-4821). ",
		"```go\nfunc retry(ctx context.Context, n int) error {\n\tfor i := 0; i < n; i++ {\n\t\tif err := call(ctx); err == nil {\n\t\t\treturn nil\n\t\t}\n\t}\n\treturn errors.New(\"gave up\")\n}\n```\n",
		"- Step 1: rotate the key `" + keyOpenAI + "` and update the vault.\n- Step 2: invalidate sessions.\n- Step 3: notify the customer (account 4111 1111 1111 1111 was used in the test).\n",
		"Note: refunds go to IBAN GB82 WEST 1234 5698 7654 32 within 5 to 7 business days; the reference is INV-2024-00017 and the amount is 1,249.00 EUR. ",
		"In short, nothing else needs to change: the existing dashboards, alerts and runbooks remain valid, and the next review is scheduled for the first week of April. ",
		"### Why the retries failed\n\nEach worker opened a new connection per attempt instead of reusing the pool, so under load the database refused new sessions and every retry made the situation worse. ",
		"The fix is small: keep one client per process, cap concurrent attempts at eight, and add jitter to the backoff so that workers do not retry in lockstep after a shared outage. ",
		"| Service | Before | After |\n|---|---|---|\n| api | 310 ms | 180 ms |\n| search | 95 ms | 90 ms |\n| billing | 1.2 s | 400 ms |\n\n",
		"If you prefer a configuration change over a code change, set `max_idle_conns: 64` and `idle_timeout: 90s` in the client section; both are read at startup and need a restart. ",
		"Keep in mind that the numbers above come from a single day of traffic; weekends are quieter, so I would compare at least two full weeks before drawing conclusions about capacity. ",
		"> Tip: the `--dry-run` flag prints the plan without applying it, which is the safest way to review what will change in production before the maintenance window. ",
		"1. Back up the configuration.\n2. Apply the change to one replica.\n3. Watch error rates for thirty minutes.\n4. Roll out to the rest, or roll back with the saved copy.\n",
		"Finally, document the decision in the architecture log, including the alternatives we rejected (a bigger instance, a read replica) and why: both cost more and neither fixes the root cause. ",
	}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(paragraphs[i%len(paragraphs)])
	}
	return b.String()
}

func BenchmarkString(b *testing.B) {
	r := mustNew(b, Config{Detectors: Names()})
	for _, size := range []struct {
		name string
		n    int
	}{{"1KB", 1 << 10}, {"16KB", 16 << 10}, {"256KB", 256 << 10}} {
		text := prose(size.n)
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				r.String(text)
			}
		})
	}
}

// FuzzString checks that String never panics and that redacting its output
// again finds nothing: no detected value, nor a value the replacement
// exposed, is left.
func FuzzString(f *testing.F) {
	for _, text := range corpus() {
		f.Add(text)
	}
	r := mustNew(f, Config{Detectors: Names()})
	f.Fuzz(func(t *testing.T, text string) {
		checkIdempotent(t, r, text)
	})
}

// TestLinearTime runs String on inputs built to make a careless scanner
// re-read the same run for every repetition; each must stay linear. The
// limit is loose so that a loaded machine passes, and a quadratic scan (tens
// of seconds here) does not.
func TestLinearTime(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	r := mustNew(t, Config{Detectors: Names()})
	for _, unit := range []string{
		"sk-", "sk-a", "xoxb-", "github_pat_", "AIza-", "ghp_", "eyJ.", "token=", "token: ", "Bearer ", "a.token=",
		"a@", "@a.", "a.", "1 ", "1-", "1.", "+1 ", "(1", "DE89 ", "4111 ", "AKIA", "x@y.zz",
	} {
		text := strings.Repeat(unit, (256<<10)/len(unit))
		if unit == "a.token=" {
			text += strings.Repeat(".", 64<<10) // one shared trailing run
		}
		start := time.Now()
		r.String(text)
		st := r.Stream()
		for i := 0; i < len(text); i += 64 {
			st.Write(text[i:min(i+64, len(text))])
		}
		st.Flush()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%q repeated to 256 KB took %v", unit, d)
		}
	}
}
