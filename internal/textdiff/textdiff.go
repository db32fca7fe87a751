// Package textdiff marks what changed between two texts, for people to
// read: a line diff whose changed lines are compared again word by word,
// rendered as HTML with <del> and <ins> (no script, no style of its own),
// so a reviewer sees the edit itself rather than two versions side by side.
//
// It imports nothing of the gateway's. The texts are untrusted (an agent's
// proposal): every piece is HTML-escaped, and the work is bounded, a diff
// too large to compute in the bound falling back to "all removed, all
// added" rather than taking the page down.
package textdiff

import (
	"html"
	"html/template"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Op says what a Chunk is.
type Op int

// The operations of a diff.
const (
	Equal Op = iota
	Delete
	Insert
)

// A Chunk is a piece of text kept, removed or added.
type Chunk struct {
	Op   Op
	Text string
}

// maxCells bounds the longest-common-subsequence table (tokens of one side
// times the other's): 4M cells, a few MB, milliseconds. Larger inputs are
// shown as replaced whole.
const maxCells = 4 << 20

// Lines diffs a and b line by line; each chunk's text keeps its newlines.
func Lines(a, b string) []Chunk { return diff(splitLines(a), splitLines(b)) }

// Words diffs a and b word by word (runs of letters and digits, runs of
// white space, and every other character alone).
func Words(a, b string) []Chunk { return diff(splitWords(a), splitWords(b)) }

// HTML renders the change from a to b: lines kept as they are, a changed
// run of lines compared word by word, removed text in <del> and added text
// in <ins>, all of it escaped. Wrap it in a <pre> to keep the lines.
func HTML(a, b string) template.HTML {
	var out strings.Builder
	chunks := Lines(a, b)
	for i := 0; i < len(chunks); i++ {
		c := chunks[i]
		if c.Op == Equal {
			out.WriteString(html.EscapeString(c.Text))
			continue
		}
		// A hunk: the removed lines then the added ones (diff emits them
		// in that order), compared again word by word.
		var del, ins strings.Builder
		for ; i < len(chunks) && chunks[i].Op != Equal; i++ {
			if chunks[i].Op == Delete {
				del.WriteString(chunks[i].Text)
			} else {
				ins.WriteString(chunks[i].Text)
			}
		}
		i--
		writeWords(&out, del.String(), ins.String())
	}
	return template.HTML(out.String()) // every piece escaped above
}

// writeWords writes a hunk's word diff; a side that is empty is one mark.
func writeWords(out *strings.Builder, del, ins string) {
	chunks := []Chunk{{Delete, del}, {Insert, ins}}
	if del != "" && ins != "" {
		chunks = Words(del, ins)
	}
	for _, c := range chunks {
		if c.Text == "" {
			continue
		}
		t := html.EscapeString(c.Text)
		switch c.Op {
		case Delete:
			out.WriteString("<del>" + t + "</del>")
		case Insert:
			out.WriteString("<ins>" + t + "</ins>")
		default:
			out.WriteString(t)
		}
	}
}

// diff is the longest common subsequence of two token lists, as chunks in
// order, a change's deletions before its insertions, neighbours of one
// kind merged.
func diff(a, b []string) []Chunk {
	// The common prefix and suffix need no table.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out []Chunk
	add := func(op Op, s string) {
		if n := len(out); n > 0 && out[n-1].Op == op {
			out[n-1].Text += s
			return
		}
		out = append(out, Chunk{op, s})
	}
	for _, t := range a[:pre] {
		add(Equal, t)
	}
	middle(a[pre:len(a)-suf], b[pre:len(b)-suf], add)
	for _, t := range a[len(a)-suf:] {
		add(Equal, t)
	}
	return out
}

// middle diffs what lies between the common prefix and suffix.
func middle(a, b []string, add func(Op, string)) {
	n, m := len(a), len(b)
	if n == 0 || m == 0 || n*m > maxCells {
		for _, t := range a {
			add(Delete, t)
		}
		for _, t := range b {
			add(Insert, t)
		}
		return
	}
	// l[i][j] is the LCS length of a[i:] and b[j:], in one slice.
	w := m + 1
	l := make([]int32, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case a[i] == b[j]:
				l[i*w+j] = l[(i+1)*w+j+1] + 1
			case l[(i+1)*w+j] >= l[i*w+j+1]:
				l[i*w+j] = l[(i+1)*w+j]
			default:
				l[i*w+j] = l[i*w+j+1]
			}
		}
	}
	// Walk the table; pending insertions wait until the deletions of the
	// same change are out, so a hunk reads "removed, then added".
	var ins []string
	flush := func() {
		for _, t := range ins {
			add(Insert, t)
		}
		ins = ins[:0]
	}
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			flush()
			add(Equal, a[i])
			i, j = i+1, j+1
		case l[(i+1)*w+j] >= l[i*w+j+1]:
			add(Delete, a[i])
			i++
		default:
			ins = append(ins, b[j])
			j++
		}
	}
	for ; i < n; i++ {
		add(Delete, a[i])
	}
	ins = append(ins, b[j:]...)
	flush()
}

// splitLines cuts s after every newline.
func splitLines(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return append(out, s)
		}
		out, s = append(out, s[:i+1]), s[i+1:]
	}
	return out
}

// splitWords cuts s into runs of letters and digits, runs of white space,
// and single other characters (punctuation changes on its own).
func splitWords(s string) []string {
	var out []string
	class := func(r rune) int {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_':
			return 1
		case unicode.IsSpace(r):
			return 2
		}
		return 0
	}
	for s != "" {
		r, size := utf8.DecodeRuneInString(s)
		k := class(r)
		end := size
		if k != 0 {
			for end < len(s) {
				r2, sz := utf8.DecodeRuneInString(s[end:])
				if class(r2) != k {
					break
				}
				end += sz
			}
		}
		out, s = append(out, s[:end]), s[end:]
	}
	return out
}
