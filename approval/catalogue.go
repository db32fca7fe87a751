package approval

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// Spec is one specification of the catalogue.
type Spec struct {
	ID    string   `yaml:"id"`
	Title string   `yaml:"title"`
	Type  string   `yaml:"type"`
	Tags  []string `yaml:"tags"`
	// Status is free text (draft, approved, superseded…).
	Status string `yaml:"status"`
	// References are the ids this specification builds on (other
	// specifications, or targets the gateway created). The policy's
	// references.cycle fact follows them.
	References []string `yaml:"references"`
	// Path is the file, relative to the catalogue directory.
	Path string `yaml:"-"`
	// Body is the Markdown after the front matter.
	Body string `yaml:"-"`

	// Normalised terms, computed once at load for Search.
	terms      map[string]int
	titleTerms []string
	tagTerms   []string
}

// Catalogue is the registered specifications: a directory of Markdown files,
// each with an id in its front matter. It backs the policy's references
// check (known_references) and QUERY answers. It is immutable once loaded,
// so it is safe for concurrent use.
type Catalogue struct {
	byID map[string]*Spec
	ids  []string
	// templates are the per-target-type content templates, compiled at
	// load (templates.go); a type without one is not checked.
	templates map[string]*Template
}

var specID = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// LoadCatalogue reads every *.md file under dir (recursively, in lexical
// order). Each must open with front matter:
//
//	---
//	id: arch-001
//	title: Gateway architecture
//	type: architecture
//	tags: [architecture, gateway]
//	---
//
// id is required (lowercase letters, digits, '.', '_', '-'), unknown keys
// are refused, and an id used twice is an error naming both files. Every
// problem is reported, not just the first.
//
// The directory templates/ directly under dir holds the content templates
// (see loadTemplates), not specifications: it is not searched for *.md.
func LoadCatalogue(dir string) (*Catalogue, error) {
	c := &Catalogue{byID: map[string]*Spec{}}
	var problems []error
	templates, err := loadTemplates(filepath.Join(dir, templatesDir))
	if err != nil {
		problems = append(problems, err)
	}
	c.templates = templates
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == filepath.Join(dir, templatesDir) {
			return filepath.SkipDir
		}
		// Hidden names are skipped: a mounted ConfigMap holds every file
		// twice, under ..data and ..<timestamp>.
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.EqualFold(filepath.Ext(path), ".md") {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			rel = path
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("catalogue: %w", err)
		}
		s, err := parseSpec(b)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", path, err))
			return nil
		}
		s.Path = filepath.ToSlash(rel)
		if prev, dup := c.byID[s.ID]; dup {
			problems = append(problems, fmt.Errorf("%s: duplicate id %q, also in %s", path, s.ID, filepath.Join(dir, prev.Path)))
			return nil
		}
		c.byID[s.ID] = s
		c.ids = append(c.ids, s.ID)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("catalogue %s: %w", dir, err)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("catalogue %s: %w", dir, errors.Join(problems...))
	}
	sort.Strings(c.ids)
	return c, nil
}

// parseSpec splits the front matter from the body and checks it.
func parseSpec(b []byte) (*Spec, error) {
	b = bytes.TrimPrefix(b, []byte("\ufeff"))
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	rest, ok := bytes.CutPrefix(b, []byte("---\n"))
	if !ok {
		return nil, errors.New("no front matter: the file must start with a line \"---\"")
	}
	fm, body, ok := bytes.Cut(rest, []byte("\n---\n"))
	if !ok {
		fm, ok = bytes.CutSuffix(bytes.TrimRight(rest, "\n"), []byte("\n---"))
		if !ok {
			return nil, errors.New("front matter is not closed by a line \"---\"")
		}
		body = nil
	}
	var s Spec
	dec := yaml.NewDecoder(bytes.NewReader(fm))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("front matter: %w", err)
	}
	if s.ID == "" {
		return nil, errors.New("front matter: id is required")
	}
	if !specID.MatchString(s.ID) {
		return nil, fmt.Errorf("front matter: id %q: want lowercase letters, digits, '.', '_' or '-', at most 64", s.ID)
	}
	for _, ref := range s.References {
		if !specID.MatchString(ref) {
			return nil, fmt.Errorf("front matter: references: %q is not a specification id", ref)
		}
	}
	s.Body = strings.TrimSpace(string(body))
	s.terms = map[string]int{}
	for _, t := range terms(s.Body) {
		s.terms[t]++
	}
	s.titleTerms = terms(s.Title)
	for _, t := range s.Tags {
		s.tagTerms = append(s.tagTerms, terms(t)...)
	}
	return &s, nil
}

// IDs returns every id, sorted. The slice is shared: do not modify it.
func (c *Catalogue) IDs() []string { return c.ids }

// Len is the number of specifications.
func (c *Catalogue) Len() int { return len(c.ids) }

// Get returns the specification with the id.
func (c *Catalogue) Get(id string) (*Spec, bool) {
	s, ok := c.byID[id]
	return s, ok
}

// Match is a search result.
type Match struct {
	Spec  *Spec
	Score float64
}

// Search scores every specification against the query's terms and returns
// at most limit matches with a positive score, best first (ties by id).
//
// Scoring is deliberately simple and explainable: a term naming the id
// scores 10, a tag 4, a word of the title 3, and each occurrence in the body
// 1 with diminishing returns (1+ln n), so a long document does not win on
// length alone. Terms are lowercased words of two or more letters or
// digits, a trailing plural "s" dropped, common English words ignored.
func (c *Catalogue) Search(query string, limit int) []Match {
	if limit <= 0 {
		return nil
	}
	q := terms(query)
	slices.Sort(q)
	q = slices.Compact(q) // a repeated word counts once
	if len(q) == 0 {
		return nil
	}
	full := strings.ToLower(query)
	var out []Match
	for _, id := range c.ids {
		s := c.byID[id]
		score := 0.0
		if strings.Contains(full, s.ID) {
			score += 10
		}
		for _, t := range q {
			if slices.Contains(s.tagTerms, t) {
				score += 4
			}
			if slices.Contains(s.titleTerms, t) {
				score += 3
			}
			if t == s.Type {
				score += 2
			}
			if n := s.terms[t]; n > 0 {
				score += 1 + math.Log(float64(n))
			}
		}
		if score > 0 {
			out = append(out, Match{Spec: s, Score: math.Round(score*100) / 100})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

var stopwords = map[string]bool{
	"the": true, "and": true, "are": true, "what": true, "which": true, "for": true, "with": true,
	"this": true, "that": true, "from": true, "how": true, "about": true, "into": true, "current": true,
	"is": true, "of": true, "to": true, "in": true, "on": true, "an": true, "be": true, "do": true,
	"does": true, "we": true, "our": true, "any": true, "all": true, "or": true, "it": true, "as": true,
}

// terms splits text into normalised search terms.
func terms(text string) []string {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	out := words[:0]
	for _, w := range words {
		if len(w) < 2 || stopwords[w] {
			continue
		}
		if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
			w = w[:len(w)-1]
		}
		out = append(out, w)
	}
	return out
}

// NewCatalogue returns an empty catalogue, for a gateway whose default
// catalogue directory does not exist.
func NewCatalogue() *Catalogue { return &Catalogue{byID: map[string]*Spec{}} }

// Template returns the content template of a target type; false when the
// type has none (its content is not checked).
func (c *Catalogue) Template(targetType string) (*Template, bool) {
	t, ok := c.templates[targetType]
	return t, ok
}
