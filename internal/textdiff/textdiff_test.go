package textdiff

import (
	"html"
	"regexp"
	"strings"
	"testing"
)

// sides rebuilds both texts from a diff: what was kept and removed is the
// old text, what was kept and added the new one.
func sides(chunks []Chunk) (old, new string) {
	var a, b strings.Builder
	for _, c := range chunks {
		if c.Op != Insert {
			a.WriteString(c.Text)
		}
		if c.Op != Delete {
			b.WriteString(c.Text)
		}
	}
	return a.String(), b.String()
}

func TestHTML(t *testing.T) {
	for _, tc := range []struct {
		note, a, b, want string
	}{
		{"unchanged", "one\ntwo\n", "one\ntwo\n", "one\ntwo\n"},
		{"a word changed", "retention: 30 days\nowner: ops\n", "retention: 90 days\nowner: ops\n",
			"retention: <del>30</del><ins>90</ins> days\nowner: ops\n"},
		{"a line added", "a\nc\n", "a\nb\nc\n", "a\n<ins>b\n</ins>c\n"},
		{"a line removed", "a\nb\nc\n", "a\nc\n", "a\n<del>b\n</del>c\n"},
		{"from nothing", "", "new\n", "<ins>new\n</ins>"},
		{"markup is text", "<b>x</b>\n", "<script>alert(1)</script>\n",
			"&lt;<del>b</del><ins>script</ins>&gt;<del>x</del><ins>alert(1)</ins>&lt;/<del>b</del><ins>script</ins>&gt;\n"},
	} {
		if got := string(HTML(tc.a, tc.b)); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.note, got, tc.want)
		}
	}
}

// TestTooLargeFallsBack: past the table's bound the change is shown whole,
// still correct, instead of the page computing for minutes.
func TestTooLargeFallsBack(t *testing.T) {
	var a, b strings.Builder
	for i := range 3000 {
		a.WriteString(strings.Repeat("x", i%7) + "a\n")
		b.WriteString(strings.Repeat("y", i%5) + "b\n")
	}
	chunks := Lines(a.String(), b.String())
	if len(chunks) != 2 || chunks[0].Op != Delete || chunks[1].Op != Insert {
		t.Fatalf("%d chunks, want one removal and one addition", len(chunks))
	}
	if x, y := sides(chunks); x != a.String() || y != b.String() {
		t.Fatal("the fallback lost text")
	}
}

var tag = regexp.MustCompile(`</?(ins|del)>`)

// FuzzHTML: whatever the texts, the diff rebuilds both of them, and its
// HTML holds no markup but <ins> and <del> (an agent's text cannot inject
// any) and reads back as the new text once the removals are dropped.
func FuzzHTML(f *testing.F) {
	f.Add("a b c\n", "a x c\n")
	f.Add("<i>\n", "</del><script>\n")
	f.Add("\xff\n", "é\r\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, split := range []func(string, string) []Chunk{Lines, Words} {
			if x, y := sides(split(a, b)); x != a || y != b {
				t.Fatalf("diff of %q and %q rebuilds %q and %q", a, b, x, y)
			}
		}
		h := string(HTML(a, b))
		rest := tag.ReplaceAllString(h, "")
		if strings.ContainsAny(rest, "<>") {
			t.Fatalf("markup besides ins and del in %q", h)
		}
		kept := regexp.MustCompile(`(?s)<del>.*?</del>`).ReplaceAllString(h, "")
		if got := html.UnescapeString(tag.ReplaceAllString(kept, "")); got != b {
			t.Fatalf("the HTML without removals reads %q, want %q", got, b)
		}
	})
}
