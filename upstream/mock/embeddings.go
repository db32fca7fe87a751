package mock

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strings"
	"unicode"

	"github.com/sacpgw/gateway/upstream/internal/inproc"
)

func (m Provider) embeddings(req *http.Request, body []byte) *http.Response {
	bad := func(msg, param string) *http.Response { return mockBadRequest(req, msg, param) }
	var in mockRequest
	if err := json.Unmarshal(body, &in); err != nil || len(in.Input) == 0 {
		return bad("want model and input", "input")
	}
	// input is a string or an array of strings, as OpenAI's; token arrays
	// are not understood, and are refused rather than embedded as "".
	var inputs []string
	if err := json.Unmarshal(in.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(in.Input, &one); err != nil {
			return bad("input must be a string or an array of strings", "input")
		}
		inputs = []string{one}
	}
	if len(inputs) == 0 {
		return bad("input must not be empty", "input")
	}
	dim := EmbeddingDim
	if in.Dimensions != nil {
		if *in.Dimensions < 1 || *in.Dimensions > maxMockDim {
			return bad(fmt.Sprintf("dimensions must be from 1 to %d", maxMockDim), "dimensions")
		}
		dim = *in.Dimensions
	}
	// "float" is the default; "base64" is what OpenAI's Node SDK asks for
	// unless told otherwise, and decodes; anything else is refused as
	// OpenAI refuses it, rather than answered in a format the client did
	// not ask for.
	format := "float"
	if len(in.EncodingFormat) > 0 && string(in.EncodingFormat) != "null" {
		if json.Unmarshal(in.EncodingFormat, &format) != nil || format != "float" && format != "base64" {
			return bad(`encoding_format must be "float" or "base64"`, "encoding_format")
		}
	}
	data := make([]any, len(inputs))
	chars := 0
	for i, s := range inputs {
		chars += len(s)
		vec := embedding(s, dim)
		for j, x := range vec {
			// Six decimals keep the answer short; the vector stays
			// normalised to within 1e-5.
			vec[j] = math.Round(x*1e6) / 1e6
		}
		var emb any = vec
		if format == "base64" {
			// The same (rounded) values as float32, little-endian, as
			// OpenAI encodes them: both formats decode to one vector.
			raw := make([]byte, 4*len(vec))
			for j, x := range vec {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(float32(x)))
			}
			emb = base64.StdEncoding.EncodeToString(raw)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
	}
	out, _ := json.Marshal(map[string]any{
		"object": "list", "data": data, "model": in.Model,
		"usage": map[string]int{"prompt_tokens": tokens(chars), "total_tokens": tokens(chars)},
	})
	return inproc.Response(req, http.StatusOK, "application/json", out)
}

// EmbeddingDim is the length of the mock's embeddings when the request
// sets no "dimensions". 256, not fewer: an agent's profile has a hundred
// features or more, and in 64 buckets their collisions drown the signal
// (measured: 64 dimensions ranked a short query's agent second).
const EmbeddingDim = 256

// maxMockDim bounds "dimensions" (OpenAI's largest model has 3072).
const maxMockDim = 4096

// Embedding is the mock provider's embedding of text with
// EmbeddingDim dimensions (unrounded), for tests that need the vectors
// the mock answers without going through it.
func Embedding(text string) []float64 { return embedding(text, EmbeddingDim) }

// embedding is a hashed bag of features, L2-normalised, so that texts
// sharing words, or parts of words ("hotel", "hotels"), are near and others
// are not, with no model: the same text always gets the same vector.
//
// Words are the maximal runs of letters and digits of the lowercased text.
// Each word is a feature of weight 1 ("w:" + word), and so is each character
// trigram of the word padded with one space on either side (" ho", "hot",
// ..., "ls "; "c:" + trigram). A feature adds its weight
// to bucket FNV-1a-64(feature) mod dim, negated when the hash's top bit is
// set: signed hashing, so that collisions cancel out on average instead of
// making unrelated texts look alike. A text without letters or digits gets
// the zero vector.
func embedding(text string, dim int) []float64 {
	vec := make([]float64, dim)
	add := func(feature string, w float64) {
		h := fnv.New64a()
		h.Write([]byte(feature))
		sum := h.Sum64()
		if sum>>63 == 1 {
			w = -w
		}
		vec[sum%uint64(dim)] += w
	}
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for _, w := range words {
		add("w:"+w, 1)
		padded := []rune(" " + w + " ")
		for i := 0; i+3 <= len(padded); i++ {
			add("c:"+string(padded[i:i+3]), 1)
		}
	}
	var norm float64
	for _, x := range vec {
		norm += x * x
	}
	if norm == 0 {
		return vec
	}
	norm = math.Sqrt(norm)
	for i := range vec {
		vec[i] /= norm
	}
	return vec
}
