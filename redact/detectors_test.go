package redact

import (
	"strings"
	"testing"
)

// Replacements under the default template, to keep the tables readable.
const (
	rEmail = "[REDACTED:email]"
	rPhone = "[REDACTED:phone]"
	rCard  = "[REDACTED:credit_card]"
	rIBAN  = "[REDACTED:iban]"
	rSSN   = "[REDACTED:ssn]"
	rKey   = "[REDACTED:api_key]"
	rJWT   = "[REDACTED:jwt]"
	rIP    = "[REDACTED:ipv4]"
)

// Vendor keys are assembled at run time so that no literal in this file
// looks like a live credential to a secret scanner.
var (
	keyOpenAI    = "sk" + "-" + "4fG7hJ2kL9mN3pQ6rS8tU1vW5xY0zA2bC4dE6fG8hJ0kL2mN"
	keyOpenAIPrj = "sk" + "-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_Ab3dEf6hIj9kLm2nOp5q"
	keyAnthropic = "sk" + "-ant-api03-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z-AbCdEfAA"
	keyAWS       = "AK" + "IA" + "IOSFODNN7EXAMPLE"
	keyAWSSTS    = "AS" + "IA" + "Y34FZKBOKMUTVV7A"
	keyGitHub    = "gh" + "p_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
	keyGitHubOA  = "gh" + "o_" + "16C7e42F292c6912E7710c838347Ae178B4a"
	keyGitHubPAT = "github" + "_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456"
	keySlack     = "xo" + "xb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	keyGoogle    = "AI" + "za" + "SyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe"
	secret20     = "Zx8q2LmN4pR7sT1vW3yB"
	jwtHS256     = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + "." +
		"eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ" + "." +
		"SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

type redactCase struct {
	name, in, want string
}

func mustNew(tb testing.TB, cfg Config) *Redactor {
	tb.Helper()
	r, err := New(cfg)
	if err != nil {
		tb.Fatalf("New(%+v): %v", cfg, err)
	}
	return r
}

// runCases redacts with every detector on, so a table also shows that no
// other detector claims the text.
func runCases(t *testing.T, cases []redactCase) {
	t.Helper()
	r := mustNew(t, Config{Detectors: Names()})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, res := r.String(tc.in)
			if got != tc.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if n := strings.Count(tc.want, "[REDACTED:"); res.Total() != n {
				t.Errorf("String(%q): Total() = %d, want %d (%v)", tc.in, res.Total(), n, res.Counts)
			}
		})
	}
}

var emailCases = []redactCase{
	{"plain", "john.doe@example.com", rEmail},
	{"in sentence", "Contact: Jane_Smith+news@mail.example.co.uk.", "Contact: " + rEmail + "."},
	{"angle brackets", "<a.b-c@sub-domain.example.org>", "<" + rEmail + ">"},
	{"mailto", "mailto:x@y.io?subject=hi", "mailto:" + rEmail + "?subject=hi"},
	{"upper case", "WRITE TO OPS@EXAMPLE.COM", "WRITE TO " + rEmail},
	{"hyphen after tld", "a@b.com-foo", rEmail + "-foo"},
	{"two in a row", "a@b.co,c@d.org", rEmail + "," + rEmail},
	{"long local part", strings.Repeat("a", 70) + "@x.org", rEmail},
	// false positives
	{"mention", "@mention in a post", "@mention in a post"},
	{"no tld", "user@localhost", "user@localhost"},
	{"no dot", "name@example", "name@example"},
	{"one-letter tld", "a@b.c", "a@b.c"},
	{"empty label", "foo@bar..com", "foo@bar..com"},
	{"numeric tld", "x@123.456", "x@123.456"},
	{"tld followed by digit", "a@b.com9", "a@b.com9"},
	{"decorator", "@property def x(self):", "@property def x(self):"},
}

func TestEmail(t *testing.T) { runCases(t, emailCases) }

var phoneCases = []redactCase{
	{"nanp parens", "call (555) 123-4567 today", "call " + rPhone + " today"},
	{"nanp dashes", "555-123-4567", rPhone},
	{"nanp dots", "555.123.4567", rPhone},
	{"nanp spaces", "555 123 4567", rPhone},
	{"nanp leading 1", "1-800-555-0199", rPhone},
	{"nanp leading 1 parens", "1 (800) 555-0199", rPhone},
	{"intl uk", "+44 20 7946 0958", rPhone},
	{"intl us parens", "+1 (555) 123-4567", rPhone},
	{"intl dashes", "+1-555-123-4567.", rPhone + "."},
	{"intl fr", "+33 6 12 34 56 78", rPhone},
	{"intl compact", "+4915112345678", rPhone},
	{"intl trailing number left out", "+44 20 7946 0958 12345", rPhone + " 12345"},
	{"national uk", "020 7946 0958", rPhone},
	{"national fr", "06 12 34 56 78", rPhone},
	{"after colon", "tel:555-123-4567", "tel:" + rPhone},
	// false positives
	{"plain long number", "12345678901", "12345678901"},
	{"order number", "order #20240115123456", "order #20240115123456"},
	{"iso date", "2024-01-15", "2024-01-15"},
	{"dotted date", "15.01.2024", "15.01.2024"},
	{"time", "10:30:45", "10:30:45"},
	{"version", "v1.2.3 and 3.11.4", "v1.2.3 and 3.11.4"},
	{"seven digits", "555-1234", "555-1234"},
	{"row of figures", "100 200 3000", "100 200 3000"},
	{"last group too long", "555-123-45678", "555-123-45678"},
	{"too few digits", "+1234567", "+1234567"},
	{"too many digits", "+1234567890123456", "+1234567890123456"},
	{"inside identifier", "id-555-123-4567", "id-555-123-4567"},
	{"after letters", "x555-123-4567", "x555-123-4567"},
	{"plus in math", "a +5 bonus", "a +5 bonus"},
}

func TestPhone(t *testing.T) { runCases(t, phoneCases) }

var cardCases = []redactCase{
	{"visa spaces", "card 4111 1111 1111 1111 exp 12/29", "card " + rCard + " exp 12/29"},
	{"visa dashes", "4111-1111-1111-1111", rCard},
	{"visa compact", "4111111111111111", rCard},
	{"mastercard", "5555555555554444", rCard},
	{"mastercard 2-series", "2223003122003222", rCard},
	{"amex 15", "378282246310005", rCard},
	{"amex grouped", "3782 822463 10005", rCard},
	{"discover", "6011111111111117.", rCard + "."},
	{"jcb", "3530111333300000", rCard},
	{"followed by cvv", "4111 1111 1111 1111 123", rCard + " 123"},
	{"two cards", "4111111111111111,5555555555554444", rCard + "," + rCard},
	// false positives
	{"bad luhn", "4111 1111 1111 1112", "4111 1111 1111 1112"},
	{"bad luhn compact", "4111111111111112", "4111111111111112"},
	{"starts with 1", "1234567812345670", "1234567812345670"},
	{"too long run", "41111111111111111111111", "41111111111111111111111"},
	{"too short", "411111111111", "411111111111"},
	{"letter after", "4111111111111111x", "4111111111111111x"},
	{"letter before", "ref4111111111111111", "ref4111111111111111"},
	{"double space", "4111  1111 1111 1111", "4111  1111 1111 1111"},
}

func TestCreditCard(t *testing.T) { runCases(t, cardCases) }

var ibanCases = []redactCase{
	{"de spaced", "IBAN: DE89 3704 0044 0532 0130 00.", "IBAN: " + rIBAN + "."},
	{"de compact", "DE89370400440532013000", rIBAN},
	{"gb letters in bban", "GB82 WEST 1234 5698 7654 32", rIBAN},
	{"gb compact", "GB82WEST12345698765432", rIBAN},
	{"fr", "FR14 2004 1010 0505 0001 3M02 606", rIBAN},
	{"nl", "NL91ABNA0417164300", rIBAN},
	{"be", "(BE68539007547034)", "(" + rIBAN + ")"},
	{"followed by words", "DE89 3704 0044 0532 0130 00 is mine", rIBAN + " is mine"},
	// false positives
	{"wrong checksum", "GB82 WEST 1234 5698 7654 33", "GB82 WEST 1234 5698 7654 33"},
	{"wrong checksum compact", "DE89370400440532013001", "DE89370400440532013001"},
	{"wrong check digits", "DE88370400440532013000", "DE88370400440532013000"},
	{"unknown country", "XX89370400440532013000", "XX89370400440532013000"},
	{"too short", "DE8937040044053201300", "DE8937040044053201300"},
	{"letter after", "DE89370400440532013000X", "DE89370400440532013000X"},
	{"lower case", "de89370400440532013000", "de89370400440532013000"},
	{"part of word", "XDE89370400440532013000", "XDE89370400440532013000"},
}

func TestIBAN(t *testing.T) { runCases(t, ibanCases) }

var ssnCases = []redactCase{
	{"plain", "123-45-6789", rSSN},
	{"in sentence", "SSN: 078-05-1120.", "SSN: " + rSSN + "."},
	// false positives
	{"area 000", "000-12-3456", "000-12-3456"},
	{"area 666", "666-12-3456", "666-12-3456"},
	{"area 9xx", "900-12-3456", "900-12-3456"},
	{"group 00", "123-00-4567", "123-00-4567"},
	{"serial 0000", "123-45-0000", "123-45-0000"},
	{"long serial", "123-45-67890", "123-45-67890"},
	{"long area", "1234-56-7890", "1234-56-7890"},
	{"no dashes", "123456789", "123456789"},
	{"inside identifier", "X-123-45-6789", "X-123-45-6789"},
}

func TestSSN(t *testing.T) { runCases(t, ssnCases) }

var apiKeyCases = []redactCase{
	{"openai", "key " + keyOpenAI + " end", "key " + rKey + " end"},
	{"openai project", keyOpenAIPrj, rKey},
	{"anthropic", "ANTHROPIC_API_KEY=" + keyAnthropic, "ANTHROPIC_API_KEY=" + rKey},
	{"aws", "aws_access_key_id = " + keyAWS, "aws_access_key_id = " + rKey},
	{"aws sts", keyAWSSTS + ".", rKey + "."},
	{"github classic", keyGitHub, rKey},
	{"github oauth", "(" + keyGitHubOA + ")", "(" + rKey + ")"},
	{"github fine-grained", keyGitHubPAT, rKey},
	{"slack", "slack: " + keySlack, "slack: " + rKey},
	{"google", keyGoogle, rKey},
	{"bearer", "Authorization: Bearer " + secret20, "Authorization: Bearer " + rKey},
	{"bearer lower case", "authorization: bearer " + secret20, "authorization: bearer " + rKey},
	{"api_key=", "https://x.io/v1?api_key=" + secret20 + "&q=1", "https://x.io/v1?api_key=" + rKey + "&q=1"},
	{"json token", `{"token": "` + secret20 + `"}`, `{"token": "` + rKey + `"}`},
	{"yaml client_secret", "client_secret: " + secret20, "client_secret: " + rKey},
	{"env var", "export OPENAI_API_KEY=" + secret20, "export OPENAI_API_KEY=" + rKey},
	{"header", "X-Auth-Token: " + secret20, "X-Auth-Token: " + rKey},
	{"go :=", `token := "` + secret20 + `"`, `token := "` + rKey + `"`},
	{"hex token", "token=9f86d081884c7d659a2feaa0c55ad015", "token=" + rKey},
	{"dotted property name", "spring.datasource.password=" + secret20 + ".", "spring.datasource.password=" + rKey + "."},
	{"keyword inside a value", "token=ab.password=" + secret20, "token=" + rKey},
	// false positives
	{"library name", "use sk-learn for that", "use sk-learn for that"},
	{"hyphenated phrase", "sk-this-is-just-a-long-hyphenated-phrase-here", "sk-this-is-just-a-long-hyphenated-phrase-here"},
	{"inside word", "task-" + keyOpenAI[3:], "task-" + keyOpenAI[3:]},
	{"bearer prose", "the bearer of good news", "the bearer of good news"},
	{"placeholder", "api_key=YOUR_API_KEY_HERE_PLEASE", "api_key=YOUR_API_KEY_HERE_PLEASE"},
	{"digits only", "token: 1234567890123456", "token: 1234567890123456"},
	{"low entropy", "password=aaaaaaaaaaaaaaaaaaaa1", "password=aaaaaaaaaaaaaaaaaaaa1"},
	{"short", "password: hunter2", "password: hunter2"},
	{"not a keyword", "max_tokens: 4096, model: gpt4o20240806abcdef", "max_tokens: 4096, model: gpt4o20240806abcdef"},
	{"aws too short", keyAWS[:19], keyAWS[:19]},
	{"aws too long", keyAWS + "X", keyAWS + "X"},
	{"aws lower case", "AKIAiosfodnn7example", "AKIAiosfodnn7example"},
	{"github short", "ghp_abc123", "ghp_abc123"},
	{"random words", "authentication tokenization secretive passwords", "authentication tokenization secretive passwords"},
	{"AIza short", "AIzaSyShort", "AIzaSyShort"},
}

func TestAPIKey(t *testing.T) { runCases(t, apiKeyCases) }

var jwtCases = []redactCase{
	{"plain", "jwt " + jwtHS256 + " end", "jwt " + rJWT + " end"},
	{"bearer prefers jwt", "Authorization: Bearer " + jwtHS256, "Authorization: Bearer " + rJWT},
	{"sentence end", jwtHS256 + ".", rJWT + "."},
	{"unsigned", "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", rJWT + "."},
	{"quoted", `"` + jwtHS256 + `"`, `"` + rJWT + `"`},
	// false positives
	{"header only", "eyJhbGciOiJIUzI1NiJ9", "eyJhbGciOiJIUzI1NiJ9"},
	{"short header", "eyJhb.eyJ.x", "eyJhb.eyJ.x"},
	{"inside word", "keyJhbGciOiJIUzI1NiJ9.eyJ.x", "keyJhbGciOiJIUzI1NiJ9.eyJ.x"},
	{"two parts not json", "eyJhbGciOiJIUzI1NiJ9.abc", "eyJhbGciOiJIUzI1NiJ9.abc"},
}

func TestJWT(t *testing.T) { runCases(t, jwtCases) }

var ipv4Cases = []redactCase{
	{"plain", "192.168.1.1", rIP},
	{"with port", "10.0.0.1:8080", rIP + ":8080"},
	{"sentence end", "resolves to 8.8.8.8.", "resolves to " + rIP + "."},
	{"max", "255.255.255.255", rIP},
	{"range", "10.0.0.1-10.0.0.5", rIP + "-" + rIP},
	{"cidr", "172.16.0.0/12", rIP + "/12"},
	{"url", "http://127.0.0.1/x", "http://" + rIP + "/x"},
	// false positives
	{"five parts", "1.2.3.4.5", "1.2.3.4.5"},
	{"octet too large", "999.1.1.1", "999.1.1.1"},
	{"256", "256.1.1.1", "256.1.1.1"},
	{"three parts", "1.2.3", "1.2.3"},
	{"version prefix", "v1.2.3.4", "v1.2.3.4"},
	{"letter after", "1.2.3.4a", "1.2.3.4a"},
	{"four digits", "1234.1.1.1", "1234.1.1.1"},
	{"dotted prefix", "x.1.2.3.4", "x.1.2.3.4"},
}

func TestIPv4(t *testing.T) { runCases(t, ipv4Cases) }

// overlapCases pin how overlapping candidates are resolved: the earliest
// start wins, and what sticks out of another candidate is still replaced.
var overlapCases = []redactCase{
	{"email wins over key at same start", keyOpenAI + "@example.com", rEmail},
	{"card sticks out of phone", "+1 4111 1111 1111 1111", rPhone + rCard},
	{"key after keyword prefers vendor rule", "api_key=" + keyOpenAI, "api_key=" + rKey},
	{"ip in email domain is not an email", "a@10.0.0.1", "a@" + rIP},
	// A keyword run that fails the entropy test is still taken when a value
	// overlaps its first 256 bytes: otherwise, once the value is replaced,
	// the shorter run could pass, and redacting again would find it.
	{"keyword run holding a card", "token: aaaaaaaaaaaaaaaa+4111111111111111", "token: " + rKey},
	{"long keyword run holding a card", "token: " + strings.Repeat("ab/", 20) + "+4111111111111111" + strings.Repeat("/ab", 100) + " end", "token: " + rKey + " end"},
	{"card past the sample", "token: " + strings.Repeat("ab/", 90) + "+4111111111111111 end", "token: " + strings.Repeat("ab/", 90) + "+" + rCard + " end"},
	{"long low-entropy run", "token: " + strings.Repeat("ab/", 100) + " end", "token: " + strings.Repeat("ab/", 100) + " end"},
}

func TestOverlap(t *testing.T) { runCases(t, overlapCases) }

func TestNextDigit(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 11; pos++ {
			b := []byte("abcdefghijk")
			b[pos] = byte(c)
			want := -1
			if c >= '0' && c <= '9' {
				want = pos
			}
			if got := nextDigit(string(b), 0); got != want {
				t.Fatalf("byte %#x at %d: got %d, want %d", c, pos, got, want)
			}
		}
	}
}

func TestLuhn(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"4111111111111111", true},
		{"4111111111111112", false},
		{"79927398713", true},
		{"79927398710", false},
		{"0", true},
	} {
		d := []byte(tc.in)
		for i := range d {
			d[i] -= '0'
		}
		if got := luhn(d); got != tc.want {
			t.Errorf("luhn(%s) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestIBANLengths(t *testing.T) {
	for cc, want := range map[string]int{"DE": 22, "GB": 22, "FR": 27, "NO": 15, "MT": 31, "RU": 33, "XX": 0, "de": 0} {
		if got := ibanLength(cc[0], cc[1]); got != want {
			t.Errorf("ibanLength(%s) = %d, want %d", cc, got, want)
		}
	}
}

func TestEntropy(t *testing.T) {
	if h := entropy("aaaaaaaa"); h != 0 {
		t.Errorf("entropy of one symbol = %v, want 0", h)
	}
	if h := entropy("abcdefghijklmnop"); h != 4 {
		t.Errorf("entropy of 16 distinct symbols = %v, want 4", h)
	}
}
