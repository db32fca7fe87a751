package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/sacpgw/gateway/internal/scope"
)

// Rendering the protocol's settled answer for the client: a chat
// completion, or an OpenAI event stream with keep-alives while the model is
// asked (and asked again).

type completionMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type completionChoice struct {
	Index        int               `json:"index"`
	Message      completionMessage `json:"message"`
	FinishReason string            `json:"finish_reason"`
}

// completionOf is a chat completion (C: completionChoice) or a chunk of
// its stream (C: the chunk's choice): the same object but for its choices.
type completionOf[C any] struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []C          `json:"choices"`
	Usage   *scope.Usage `json:"usage,omitempty"`
}

type completion = completionOf[completionChoice]

func completionJSON(ans *answer, content, finish string, usage scope.Usage, withUsage bool) []byte {
	c := completion{ID: ans.id, Object: "chat.completion", Created: ans.created, Model: ans.model,
		Choices: []completionChoice{{Message: completionMessage{Role: "assistant", Content: content}, FinishReason: finish}}}
	if withUsage {
		c.Usage = &usage
	}
	b, _ := json.Marshal(c)
	return b
}

// streamChunkSize is how much content one re-emitted chunk carries.
const streamChunkSize = 64

// streamEvents renders the validated answer as an OpenAI SSE stream: a role
// chunk, content chunks, the finish chunk, a usage chunk if the client
// asked for one, and [DONE].
func streamEvents(ans *answer, content, finish string, usage scope.Usage, withUsage bool) [][]byte {
	type delta struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Delta        delta   `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	type chunk = completionOf[choice]
	var out [][]byte
	emit := func(c chunk) {
		c.ID, c.Object, c.Created, c.Model = ans.id, "chat.completion.chunk", ans.created, ans.model
		b, _ := json.Marshal(c)
		out = append(out, append(append([]byte("data: "), b...), '\n', '\n'))
	}
	empty := ""
	emit(chunk{Choices: []choice{{Delta: delta{Role: "assistant", Content: &empty}}}})
	for i := 0; i < len(content); {
		j := min(len(content), i+streamChunkSize)
		for j < len(content) && j > i && !utf8Start(content[j]) {
			j-- // never split a UTF-8 sequence across chunks
		}
		piece := content[i:j]
		emit(chunk{Choices: []choice{{Delta: delta{Content: &piece}}}})
		i = j
	}
	emit(chunk{Choices: []choice{{Delta: delta{}, FinishReason: &finish}}})
	if withUsage {
		u := usage
		emit(chunk{Choices: []choice{}, Usage: &u})
	}
	out = append(out, []byte("data: [DONE]\n\n"))
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// sseOut writes a protocol agent's stream: nothing until the answer is
// ready, except SSE comment keep-alives while the model is being asked
// (and asked again). Headers are committed by the first keep-alive, so the
// X-SACP-* values then travel as HTTP trailers.
type sseOut struct {
	w       http.ResponseWriter
	mu      sync.Mutex
	timer   *time.Timer
	every   time.Duration
	begun   bool
	stopped bool
}

const sacpTrailers = "X-SACP-Status, X-SACP-Valid, X-SACP-Attempts"

func newSSEOut(w http.ResponseWriter, every time.Duration) *sseOut {
	o := &sseOut{w: w, every: every}
	if every > 0 {
		// The timer may fire before AfterFunc returns: publish it under the lock.
		o.mu.Lock()
		o.timer = time.AfterFunc(every, o.keepAlive)
		o.mu.Unlock()
	}
	return o
}

func (o *sseOut) keepAlive() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return
	}
	if !o.begun {
		// Declared before the headers go out, so the X-SACP-* values can
		// follow the body as trailers.
		o.w.Header().Set("Trailer", sacpTrailers)
		o.begin(http.StatusOK)
	}
	// A comment line without the blank line that would end an event: some
	// SDKs (openai-go v1) dispatch an empty event on ": x\n\n" and fail to
	// decode it, while every SSE parser skips a lone comment line.
	_, _ = io.WriteString(o.w, ": keep-alive\n")
	_ = http.NewResponseController(o.w).Flush()
	o.timer.Reset(o.every)
}

// begin writes the stream's headers; o.mu must be held.
func (o *sseOut) begin(status int) {
	o.begun = true
	writeSSEHeader(o.w, status)
}

func (o *sseOut) started() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.begun
}

func (o *sseOut) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopped = true
	if o.timer != nil {
		o.timer.Stop()
	}
}

// finish stops the keep-alives and writes the final events; h are the
// X-SACP-* values (headers if nothing was sent yet, else trailers).
func (o *sseOut) finish(h map[string]string, status int, body []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopped = true
	if o.timer != nil {
		o.timer.Stop()
	}
	if !o.begun {
		for k, v := range h {
			o.w.Header().Set(k, v)
		}
		if status != http.StatusOK {
			o.w.Header().Set("Content-Type", "text/event-stream")
			o.begun = true
			o.w.WriteHeader(status)
		} else {
			o.begin(status)
		}
	} else {
		for k, v := range h {
			o.w.Header().Set(k, v) // declared in Trailer: sent after the body
		}
	}
	_, _ = o.w.Write(body)
	_ = http.NewResponseController(o.w).Flush()
}
