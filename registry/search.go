package registry

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Query is a registry query: compact SACP's verb, inputs and output_type,
// plus free text that ranks the agents and tags that filter them.
type Query struct {
	// Text describes the capability wanted in words ("find hotels in
	// Paris"); it ranks, it does not filter.
	Text       string   `json:"text,omitempty"`
	Verb       string   `json:"verb"`
	Inputs     []string `json:"inputs"`
	OutputType string   `json:"output_type"`
	// Tags filter: an agent must carry every one (exact match).
	Tags []string `json:"tags,omitempty"`
}

// Ranking methods: of an answer, and of each of its hits.
const (
	// RankStructural: no text; today's verb/output/inputs score.
	RankStructural = "structural"
	// RankSemantic: cosine similarity of embeddings, blended with the
	// structural score.
	RankSemantic = "semantic"
	// RankLexical: BM25 over the profile texts, blended likewise.
	RankLexical = "lexical"
)

// Top-k bounds of a query (top_k).
const (
	DefaultTopK = 5
	MaxTopK     = 50
)

// The blend of a free-text ranking, when the query also has structural
// criteria (verb, inputs, output_type): score = TextWeight × the text part
// (semantic or lexical) + StructuralWeight × the structural part. Without
// structural criteria the score is the text part alone.
const (
	TextWeight       = 0.7
	StructuralWeight = 0.3
)

// BM25 parameters (Robertson's usual values).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// maxProfileBytes clips a profile text (an embeddings model reads a few
// thousand tokens; a spawned agent's description is the spawner's words).
const maxProfileBytes = 8 << 10

// Match is an entry with how well it matches a query.
type Match struct {
	Entry
	// Score orders the hits, best first. Structural ranking: 0.4 verb + 0.3
	// output type + 0.3 × the share of inputs taken (1 for a query with
	// tags only). Semantic and lexical: 0..1, see TextWeight.
	Score float64 `json:"score"`
	// Why lists what matched ("verb", "inputs 2/3", "output_type", "tags").
	Why []string `json:"matched"`
	// Method is how this hit was ranked (RankStructural, RankSemantic,
	// RankLexical).
	Method string `json:"method"`
	// ScoreParts are the parts of a free-text ranking's score.
	ScoreParts *ScoreParts `json:"score_parts,omitempty"`
}

// ScoreParts are the parts of a free-text ranking's score, each 0..1.
type ScoreParts struct {
	// Semantic is the cosine similarity of the query text's embedding and
	// the agent's, negative values as 0.
	Semantic *float64 `json:"semantic,omitempty"`
	// Lexical is the agent's BM25 score divided by the best candidate's.
	Lexical *float64 `json:"lexical,omitempty"`
	// Structural is the structural score divided by the most the query's
	// criteria can give (0 when it has none).
	Structural float64 `json:"structural"`
}

// Answer is a ranked answer to a query.
type Answer struct {
	// Ranking is the method of the answer: RankStructural without text;
	// RankSemantic or RankLexical with.
	Ranking string `json:"ranking"`
	// RankingNote says why a free-text query was ranked lexically although
	// semantic selection is configured, or which agents were left out.
	RankingNote string  `json:"ranking_note,omitempty"`
	Data        []Match `json:"data"`
	// Suggestion is set when nothing matched.
	Suggestion *Suggestion `json:"suggestion,omitempty"`
}

// Query returns every agent matching q's structural criteria and tags, best
// first (q.Text is not looked at: Search ranks by it). An agent matches
// when it carries every tag, supports the verb (if given) and produces the
// output type (if given: its outputs, or its verbs' outputs when it declares
// none); it ranks by verb (0.4), output type (0.3) and the share of the
// query's inputs it takes (0.3); with inputs only, it must take one. Inputs
// compare by their last dotted part and case-insensitively ("ctx.history"
// takes "history"). Ties go by name.
func (r *Registry) Query(ctx context.Context, q Query) ([]Match, error) {
	v, err := r.current(ctx)
	out := r.candidates(v, v.resolveVerb(q))
	sortMatches(out)
	return out, err
}

// Search answers a query for agentID (the querying agent), at most topK
// hits (DefaultTopK when 0 or less, at most MaxTopK). The agents are those
// Query finds; q.Text, when given, ranks them:
//
//   - semantically when an Embedder is wired and registry.embeddings is
//     configured: the cosine similarity of the text's embedding and each
//     agent's (its configured Embedding, or the embedding of ProfileText,
//     cached by agent, profile hash and model). An agent whose configured
//     Embedding has another dimension than the model's vectors is left out
//     of the answer, logged once and named in the ranking note: it cannot
//     be compared, and ranking it by other means would mix scales. With
//     no structural criterion an agent whose cosine rounds to 0 or less is
//     no hit.
//   - lexically otherwise, or when an embeddings call fails (logged, and
//     said in RankingNote): BM25 (k1 1.2, b 0.75) of the text's words
//     against each agent's ProfileText, with the registry's agents as the
//     collection; words are the maximal runs of letters and digits,
//     lowercased, each query word counted once, no stemming and no stop
//     words. With no structural criterion an agent sharing no word with
//     the text is no hit.
//
// An empty answer carries a SPAWN_AGENT suggestion (Suggest). The error
// is a Store that could not be read: the answer is then of the last known
// registry.
func (r *Registry) Search(ctx context.Context, agentID string, q Query, topK int) (Answer, error) {
	if topK <= 0 {
		topK = DefaultTopK
	}
	topK = min(topK, MaxTopK)
	if strings.TrimSpace(q.Text) == "" {
		q.Text = ""
	}
	v, err := r.current(ctx)
	q = v.resolveVerb(q)
	cands := r.candidates(v, q)
	ans := Answer{Ranking: RankStructural}
	switch {
	case q.Text == "" || len(cands) == 0:
		if q.Text != "" {
			ans.Ranking = r.textRanking(v)
		}
		ans.Data = cands
	default:
		ans = r.rankText(ctx, v, agentID, q, cands)
	}
	sortMatches(ans.Data)
	if len(ans.Data) > topK {
		ans.Data = ans.Data[:topK]
	}
	if len(ans.Data) == 0 {
		ans.Suggestion = r.suggest(v, q)
	}
	return ans, err
}

// resolveVerb is q with its verb by the library's name: a verb asked by
// its alias ("s") is the verb agents list ("search"), in the matches and in
// a spawn suggestion alike.
func (v *view) resolveVerb(q Query) Query {
	if canon, ok := v.lib.Resolve(q.Verb); ok {
		q.Verb = canon
	}
	return q
}

// textRanking is the method free text is ranked by in v.
func (r *Registry) textRanking(v *view) string {
	if r.opts.embedder != nil && v.embedModel != "" {
		return RankSemantic
	}
	return RankLexical
}

// candidates are the entries matching q's filters, with their structural
// score.
func (r *Registry) candidates(v *view, q Query) []Match {
	out := []Match{}
	for _, e := range v.entries {
		if !hasAll(e.Tags, q.Tags) {
			continue
		}
		m := Match{Entry: e, Why: []string{}, Method: RankStructural}
		if len(q.Tags) > 0 {
			m.Why = append(m.Why, "tags")
		}
		if q.Verb != "" {
			if !containsFold(e.SupportedVerbs, q.Verb) {
				continue
			}
			m.Score += 0.4
			m.Why = append(m.Why, "verb")
		}
		if q.OutputType != "" {
			// An agent's own outputs say what it returns; without them,
			// its verbs' definitions do.
			if !containsFold(e.Outputs, q.OutputType) && (len(e.Outputs) > 0 || !r.verbOutputs(v.lib, e, q.OutputType)) {
				continue
			}
			m.Score += 0.3
			m.Why = append(m.Why, "output_type")
		}
		if len(q.Inputs) > 0 {
			have := 0
			for _, in := range q.Inputs {
				if takesInput(e.Inputs, in) {
					have++
				}
			}
			if have > 0 {
				m.Score += 0.3 * float64(have) / float64(len(q.Inputs))
				m.Why = append(m.Why, fmt.Sprintf("inputs %d/%d", have, len(q.Inputs)))
			}
			if q.Verb == "" && q.OutputType == "" && have == 0 {
				continue
			}
		}
		if structuralMax(q) == 0 {
			m.Score = 1 // tags (or text) only: every criterion is met
		}
		m.Score = round3(m.Score)
		out = append(out, m)
	}
	return out
}

// structuralMax is the most q's structural criteria can give.
func structuralMax(q Query) float64 {
	var s float64
	if q.Verb != "" {
		s += 0.4
	}
	if q.OutputType != "" {
		s += 0.3
	}
	if len(q.Inputs) > 0 {
		s += 0.3
	}
	return s
}

// rankText ranks cands by q.Text: semantically when it can, else lexically.
func (r *Registry) rankText(ctx context.Context, v *view, agentID string, q Query, cands []Match) Answer {
	if r.textRanking(v) == RankLexical {
		ans := Answer{Ranking: RankLexical, Data: r.lexical(v, q, cands)}
		if v.embedModel != "" {
			// Configured, but this gateway was built without an embedder.
			r.warnOnce("no-embedder:"+v.embedModel, "registry: registry.embeddings is configured but no embedder is wired: free-text queries rank lexically", "model", v.embedModel)
			ans.RankingNote = "semantic selection is not available in this gateway: ranked lexically (BM25)"
		}
		return ans
	}
	data, note, err := r.semantic(ctx, v, agentID, q, cands)
	if err != nil {
		// Details stay in the log: they may name another agent's limits.
		r.opts.log.Warn("registry: semantic ranking failed, ranking lexically", "agent", agentID, "model", v.embedModel, "error", err.Error())
		return Answer{Ranking: RankLexical, RankingNote: "the embeddings call failed: ranked lexically (BM25)", Data: r.lexical(v, q, cands)}
	}
	return Answer{Ranking: RankSemantic, RankingNote: note, Data: data}
}

// blend is the score of a hit with text part t and structural part s.
func blend(q Query, t, s float64) float64 {
	if structuralMax(q) == 0 {
		return t
	}
	return TextWeight*t + StructuralWeight*s
}

// structuralPart is m's structural score on 0..1.
func structuralPart(q Query, m Match) float64 {
	if mx := structuralMax(q); mx > 0 {
		return round3(m.Score / mx)
	}
	return 0
}

// semantic ranks cands by cosine similarity to q.Text. note names the
// agents left out for a configured embedding of the wrong dimension.
func (r *Registry) semantic(ctx context.Context, v *view, agentID string, q Query, cands []Match) (out []Match, note string, err error) {
	qv, err := r.embedOne(ctx, agentID, q.Text)
	if err != nil {
		return nil, "", fmt.Errorf("query text: %w", err)
	}
	dim := len(qv)
	vecs := make([][]float64, len(cands))
	var pending []int
	var left []string
	for i, m := range cands {
		if len(m.Embedding) > 0 {
			if len(m.Embedding) != dim {
				r.warnOnce(fmt.Sprintf("dim:%s:%s:%d:%d", m.AgentName, v.embedModel, len(m.Embedding), dim),
					"registry: agent's configured embedding does not fit the embeddings model: the agent is left out of free-text answers",
					"agent", m.AgentName, "model", v.embedModel, "embedding_dimensions", len(m.Embedding), "model_dimensions", dim)
				left = append(left, m.AgentName)
				continue
			}
			vecs[i] = m.Embedding
			continue
		}
		if vec := r.cachedVector(ctx, r.vectorKey(v, m.Entry), dim); vec != nil {
			vecs[i] = vec
			continue
		}
		pending = append(pending, i)
	}
	if err := r.embedProfiles(ctx, v, cands, pending, vecs, dim); err != nil {
		return nil, "", err
	}
	for i, m := range cands {
		if vecs[i] == nil {
			continue // left out above
		}
		sem := round3(max(0, cosine(qv, vecs[i])))
		if structuralMax(q) == 0 && sem == 0 {
			continue
		}
		st := structuralPart(q, m)
		m.Method, m.ScoreParts = RankSemantic, &ScoreParts{Semantic: &sem, Structural: st}
		m.Score = round3(blend(q, sem, st))
		out = append(out, m)
	}
	if len(left) > 0 {
		note = fmt.Sprintf("left out, their configured embedding does not have the model's %d dimensions: %s", dim, strings.Join(left, ", "))
	}
	return out, note, nil
}

// ProfileCaller is who embeds the candidates' profiles: the gateway's own
// identity (the Embedder maps it), never a candidate, so that an agent's
// permissions do not decide whether a query is ranked semantically. Agent
// names cannot contain ':', so no agent can be it.
const ProfileCaller = "gateway:registry"

// embedProfiles embeds the profiles of cands[pending] into vecs, four calls
// at a time,
// and caches them. Any failure fails the whole ranking: a ranking of some
// agents by embeddings and others by nothing would be no ranking.
func (r *Registry) embedProfiles(ctx context.Context, v *view, cands []Match, pending []int, vecs [][]float64, dim int) error {
	if len(pending) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, 4)
	)
	for _, i := range pending {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			e := cands[i].Entry
			// Every profile is embedded by the gateway itself: as the
			// candidate, one agent not allowed the model would turn every
			// free-text query lexical.
			vec, err := r.embedOne(ctx, ProfileCaller, ProfileText(e))
			if err == nil && len(vec) != dim {
				err = fmt.Errorf("%d dimensions, the query text's has %d", len(vec), dim)
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("profile of %s: %w", e.AgentName, err)
					cancel()
				}
				mu.Unlock()
				return
			}
			vecs[i] = vec
			k := r.vectorKey(v, e)
			_ = r.vectors.Put(ctx, k, vec)
			if r.opts.shared != nil {
				if err := r.opts.shared.Put(context.WithoutCancel(ctx), k, vec); err != nil {
					r.opts.log.Warn("registry: embedding not cached", "agent", e.AgentName, "error", err.Error())
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// embedOne embeds one text as agentID, within the embed timeout, and checks
// the vector.
func (r *Registry) embedOne(ctx context.Context, agentID, text string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.embedTimeout)
	defer cancel()
	vecs, err := r.opts.embedder.Embed(ctx, agentID, []string{text})
	if err != nil {
		return nil, err
	}
	if len(vecs) != 1 {
		return nil, fmt.Errorf("the embedder returned %d vectors for 1 text", len(vecs))
	}
	if err := checkVector(vecs[0]); err != nil {
		return nil, fmt.Errorf("the embedder returned %w", err)
	}
	return vecs[0], nil
}

// vectorKey is the cache key of e's profile in v.
func (r *Registry) vectorKey(v *view, e Entry) VectorKey {
	return VectorKey{AgentID: e.AgentName, ProfileSHA256: sha256Hex([]byte(ProfileText(e))), Model: v.embedModel}
}

// cachedVector is e's profile vector from memory, else from the shared
// cache (then kept in memory), or nil. A vector of another dimension than
// the model's is stale (the model changed under its name): a miss.
func (r *Registry) cachedVector(ctx context.Context, k VectorKey, dim int) []float64 {
	if vec, ok, _ := r.vectors.Get(ctx, k); ok && len(vec) == dim {
		return vec
	}
	if r.opts.shared == nil {
		return nil
	}
	vec, ok, err := r.opts.shared.Get(ctx, k)
	if err != nil {
		r.opts.log.Warn("registry: cached embedding unreadable, embedding anew", "agent", k.AgentID, "error", err.Error())
		return nil
	}
	if !ok || len(vec) != dim {
		return nil
	}
	_ = r.vectors.Put(ctx, k, vec)
	return vec
}

// warnOnce logs msg the first time key is seen.
func (r *Registry) warnOnce(key, msg string, args ...any) {
	r.warnMu.Lock()
	seen := r.warned[key]
	r.warned[key] = true
	r.warnMu.Unlock()
	if !seen {
		r.opts.log.Warn(msg, args...)
	}
}

// lexical ranks cands by BM25 of q.Text against their profile texts.
func (r *Registry) lexical(v *view, q Query, cands []Match) []Match {
	idx := v.textIndex()
	terms := uniq(tokens(q.Text))
	scores := make([]float64, len(cands))
	best := 0.0
	for i, m := range cands {
		scores[i] = idx.bm25(v.byName[m.AgentName], terms)
		best = max(best, scores[i])
	}
	out := make([]Match, 0, len(cands))
	for i, m := range cands {
		if structuralMax(q) == 0 && scores[i] == 0 {
			continue
		}
		lex := 0.0
		if best > 0 {
			lex = round3(scores[i] / best)
		}
		st := structuralPart(q, m)
		m.Method, m.ScoreParts = RankLexical, &ScoreParts{Lexical: &lex, Structural: st}
		m.Score = round3(blend(q, lex, st))
		out = append(out, m)
	}
	return out
}

// ProfileText is the text an agent is known by to free-text queries: what
// is embedded, and what BM25 reads. One line per field, in this order, a
// field without a value left out, lists joined by ", ":
//
//	name: <agent_name>
//	description: <description>
//	verbs: <supported_verbs>
//	tools: <supported_tools>
//	tags: <tags>
//	inputs: <inputs>
//	outputs: <outputs>
//
// clipped to 8 KiB. Its SHA-256 keys the cached embedding: a changed
// profile (a reload, a spawn) is embedded anew.
func ProfileText(e Entry) string {
	var b strings.Builder
	line := func(label, value string) {
		if value == "" {
			return
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(label)
		b.WriteString(": ")
		b.WriteString(value)
	}
	line("name", e.AgentName)
	line("description", strings.TrimSpace(e.Description))
	line("verbs", strings.Join(e.SupportedVerbs, ", "))
	line("tools", strings.Join(e.SupportedTools, ", "))
	line("tags", strings.Join(e.Tags, ", "))
	line("skills", skillsText(e.Skills))
	line("inputs", strings.Join(e.Inputs, ", "))
	line("outputs", strings.Join(e.Outputs, ", "))
	return clipUTF8(b.String(), maxProfileBytes)
}

// textIndex holds the BM25 statistics of a view's profile texts.
type textIndex struct {
	tf    []map[string]int // by entry index
	len   []int
	df    map[string]int
	avgdl float64
}

func (v *view) textIndex() *textIndex {
	v.textOnce.Do(func() {
		idx := &textIndex{tf: make([]map[string]int, len(v.entries)), len: make([]int, len(v.entries)), df: map[string]int{}}
		total := 0
		for i, e := range v.entries {
			toks := tokens(ProfileText(e))
			tf := make(map[string]int, len(toks))
			for _, t := range toks {
				tf[t]++
			}
			for t := range tf {
				idx.df[t]++
			}
			idx.tf[i], idx.len[i] = tf, len(toks)
			total += len(toks)
		}
		if len(v.entries) > 0 {
			idx.avgdl = float64(total) / float64(len(v.entries))
		}
		v.text = idx
	})
	return v.text
}

// bm25 is entry i's score for terms: the sum over the terms it holds of
// idf × tf·(k1+1) / (tf + k1·(1 − b + b·len/avgdl)), with Lucene's
// idf = ln(1 + (N − df + 0.5)/(df + 0.5)), which is never negative.
func (idx *textIndex) bm25(i int, terms []string) float64 {
	if idx.avgdl == 0 {
		return 0
	}
	n := float64(len(idx.tf))
	norm := bm25K1 * (1 - bm25B + bm25B*float64(idx.len[i])/idx.avgdl)
	var s float64
	for _, t := range terms {
		tf := float64(idx.tf[i][t])
		if tf == 0 {
			continue
		}
		df := float64(idx.df[t])
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		s += idf * tf * (bm25K1 + 1) / (tf + norm)
	}
	return s
}

// tokens are the maximal runs of letters and digits of s, lowercased.
func tokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func uniq(list []string) []string {
	seen := make(map[string]bool, len(list))
	out := list[:0:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// cosine is a·b / (|a||b|), 0 for a zero vector.
func cosine(a, b []float64) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += a[i] * b[i]
		na += a[i] * a[i]
		nb += b[i] * b[i]
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}

func sortMatches(ms []Match) {
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].Score != ms[j].Score {
			return ms[i].Score > ms[j].Score
		}
		return ms[i].AgentName < ms[j].AgentName
	})
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// hasAll: set holds every one of want (exact match).
func hasAll(set, want []string) bool {
	for _, w := range want {
		found := false
		for _, s := range set {
			if s == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// clipUTF8 cuts s to at most n bytes on a rune boundary.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
