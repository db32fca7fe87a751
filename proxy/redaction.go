package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sacpgw/gateway/apierror"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/scope"
)

// RedactRequests is the stage for protocol.redaction.requests: message text
// is redacted before it leaves for the provider, and a prompt that trips a
// blocking detector is refused with 400 content_filter.
func RedactRequests(r *redact.Redactor) Stage {
	return StageFunc(func(w http.ResponseWriter, req *http.Request, next http.Handler) error {
		ex := scope.Get(req.Context())
		body, res, err := redactPrompt(r, ex.Body)
		if err != nil {
			return apierror.BadRequest("messages", "Cannot scan the prompt for redaction: %v.", err)
		}
		ex.Redacted(res.Counts)
		if res.Blocked != "" {
			ex.Check("request_redaction", map[string]any{"verdict": "blocked", "detector": res.Blocked})
			return &apierror.Error{Status: http.StatusBadRequest, Type: apierror.TypeInvalidRequest, Code: "content_filter", Param: "messages",
				Message: fmt.Sprintf("The prompt contains data that may not leave the organisation (%s).", res.Blocked)}
		}
		ex.Check("request_redaction", map[string]any{"verdict": "applied", "count": res.Total()})
		ex.Body = body
		next.ServeHTTP(w, req)
		return nil
	})
}

// redactPrompt redacts the text of every message (string contents and
// text parts), leaving the rest of the body as it was.
func redactPrompt(r *redact.Redactor, body []byte) ([]byte, redact.Result, error) {
	var res redact.Result
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, res, err
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(doc["messages"], &msgs); err != nil {
		return nil, res, err
	}
	changed := false
	for _, m := range msgs {
		raw, ok := m["content"]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out, rr := r.String(s)
			res.Add(rr)
			if out != s {
				m["content"], _ = json.Marshal(out)
				changed = true
			}
			continue
		}
		var parts []map[string]json.RawMessage
		if json.Unmarshal(raw, &parts) != nil {
			continue
		}
		partsChanged := false
		for _, p := range parts {
			var text string
			if json.Unmarshal(p["text"], &text) != nil {
				continue
			}
			out, rr := r.String(text)
			res.Add(rr)
			if out != text {
				p["text"], _ = json.Marshal(out)
				partsChanged = true
			}
		}
		if partsChanged {
			m["content"], _ = json.Marshal(parts)
			changed = true
		}
	}
	if !changed {
		return body, res, nil
	}
	doc["messages"], _ = json.Marshal(msgs)
	out, err := json.Marshal(doc)
	return out, res, err
}

// redactCompletion redacts the message content of a chat completion. Text
// without findings leaves the body byte for byte as received; a blocking
// detector withholds the content and ends the choice with
// finish_reason "content_filter" (Azure OpenAI's convention).
func redactCompletion(r *redact.Redactor, body []byte) ([]byte, redact.Result) {
	var res redact.Result
	var typed struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(body, &typed) != nil {
		return body, res
	}
	outs := make([]*string, len(typed.Choices))
	changed := false
	for i, c := range typed.Choices {
		if c.Message.Content == nil {
			continue
		}
		out, rr := r.String(*c.Message.Content)
		res.Add(rr)
		if out != *c.Message.Content || rr.Blocked != "" {
			if rr.Blocked != "" {
				out = ""
			}
			outs[i] = &out
			changed = true
		}
	}
	if !changed {
		return body, res
	}
	var doc map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil || json.Unmarshal(doc["choices"], &choices) != nil {
		return body, res
	}
	for i, ch := range choices {
		if i >= len(outs) || outs[i] == nil {
			continue
		}
		var msg map[string]json.RawMessage
		if json.Unmarshal(ch["message"], &msg) != nil {
			continue
		}
		msg["content"], _ = json.Marshal(*outs[i])
		ch["message"], _ = json.Marshal(msg)
		if *outs[i] == "" && res.Blocked != "" {
			ch["finish_reason"] = json.RawMessage(`"content_filter"`)
		}
	}
	doc["choices"], _ = json.Marshal(choices)
	out, err := json.Marshal(doc)
	if err != nil {
		return body, res
	}
	return out, res
}

// streamRedactor redacts the content deltas of a plain (non-protocol) SSE
// answer across chunk boundaries: each choice has its own redact.Stream,
// which holds back a short tail that may be the start of a value, so an
// e-mail split over two chunks is still caught. Held-back text is sent with
// the choice's finish chunk or before [DONE].
type streamRedactor struct {
	r       *redact.Redactor
	streams map[int]*redact.Stream
	res     redact.Result
	// id, model and created of the last chunk, for the chunks it writes.
	id, model string
	created   int64
}

func newStreamRedactor(r *redact.Redactor) *streamRedactor {
	return &streamRedactor{r: r, streams: map[int]*redact.Stream{}}
}

type sseChunk struct {
	ID      string `json:"id"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			// Content stays raw so the event can be edited in place.
			Content json.RawMessage `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

// event returns what to send for one SSE event, and blocked=true when a
// blocking detector matched: then out is the content_filter ending and the
// stream must stop.
func (s *streamRedactor) event(ev, data []byte) (out []byte, blocked bool) {
	var c sseChunk
	if len(data) == 0 || json.Unmarshal(data, &c) != nil {
		return ev, false
	}
	if c.ID != "" {
		s.id, s.model, s.created = c.ID, c.Model, c.Created
	}
	var changed map[int]string
	var raw json.RawMessage // the single changed content, for an in-place edit
	for _, ch := range c.Choices {
		hasContent := len(ch.Delta.Content) > 0 && string(ch.Delta.Content) != "null"
		if !hasContent && ch.FinishReason == nil {
			continue
		}
		var in string
		if hasContent && json.Unmarshal(ch.Delta.Content, &in) != nil {
			continue
		}
		st := s.stream(ch.Index)
		text := st.Write(in)
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			text += st.Flush()
		}
		if st.Blocked() {
			s.collect()
			return s.blockedEnd(ch.Index), true
		}
		if (!hasContent && text == "") || (hasContent && text == in) {
			continue
		}
		if changed == nil {
			changed = map[int]string{}
		}
		changed[ch.Index] = text
		raw = ch.Delta.Content
	}
	if len(changed) == 0 {
		return ev, false
	}
	if len(changed) == 1 && len(raw) > 0 {
		for _, text := range changed {
			if out, ok := spliceContent(ev, raw, text); ok {
				return out, false
			}
		}
	}
	return s.rewrite(ev, data, changed), false
}

// spliceContent replaces the one "content" value of an event in place,
// which is far cheaper than decoding and re-encoding the chunk; it declines
// (ok=false) unless the value occurs exactly once.
func spliceContent(ev []byte, raw json.RawMessage, text string) ([]byte, bool) {
	key := []byte(`"content":`)
	i := bytes.Index(ev, raw)
	if i < 0 || bytes.Contains(ev[i+len(raw):], raw) || !bytes.HasSuffix(bytes.TrimRight(ev[:i], " "), key) {
		return nil, false
	}
	enc, err := json.Marshal(text)
	if err != nil {
		return nil, false
	}
	out := make([]byte, 0, len(ev)-len(raw)+len(enc))
	out = append(out, ev[:i]...)
	out = append(out, enc...)
	return append(out, ev[i+len(raw):]...), true
}

func (s *streamRedactor) stream(i int) *redact.Stream {
	st := s.streams[i]
	if st == nil {
		st = s.r.Stream()
		s.streams[i] = st
	}
	return st
}

// rewrite replaces the delta content of the given choices in one event.
func (s *streamRedactor) rewrite(ev, data []byte, content map[int]string) []byte {
	var doc map[string]json.RawMessage
	var choices []map[string]json.RawMessage
	if json.Unmarshal(data, &doc) != nil || json.Unmarshal(doc["choices"], &choices) != nil {
		return ev
	}
	for _, ch := range choices {
		var idx int
		_ = json.Unmarshal(ch["index"], &idx)
		text, ok := content[idx]
		if !ok {
			continue
		}
		var delta map[string]json.RawMessage
		if json.Unmarshal(ch["delta"], &delta) != nil || delta == nil {
			delta = map[string]json.RawMessage{}
		}
		delta["content"], _ = json.Marshal(text)
		ch["delta"], _ = json.Marshal(delta)
	}
	doc["choices"], _ = json.Marshal(choices)
	b, err := json.Marshal(doc)
	if err != nil {
		return ev
	}
	return sseEvent(b)
}

// flush returns chunks carrying any held-back text, to send before [DONE];
// blocked=true when the held-back text trips a blocking detector, and out
// is then the content_filter ending, [DONE] included.
func (s *streamRedactor) flush() (out []byte, blocked bool) {
	for i, st := range s.streams {
		text := st.Flush()
		if st.Blocked() {
			s.collect()
			return s.blockedEnd(i), true
		}
		if text == "" {
			continue
		}
		b, _ := json.Marshal(map[string]any{"id": s.id, "object": "chat.completion.chunk", "created": s.created, "model": s.model,
			"choices": []any{map[string]any{"index": i, "delta": map[string]any{"content": text}, "finish_reason": nil}}})
		out = append(out, sseEvent(b)...)
	}
	s.collect()
	return out, false
}

// collect gathers the streams' counts into res.
func (s *streamRedactor) collect() {
	var res redact.Result
	for _, st := range s.streams {
		res.Add(st.Result())
	}
	s.res = res
}

// blockedEnd ends the stream: the choice finishes with content_filter and
// [DONE] follows. Nothing of the blocked value was sent.
func (s *streamRedactor) blockedEnd(index int) []byte {
	b, _ := json.Marshal(map[string]any{"id": s.id, "object": "chat.completion.chunk", "created": s.created, "model": s.model,
		"choices": []any{map[string]any{"index": index, "delta": map[string]any{}, "finish_reason": "content_filter"}}})
	return append(sseEvent(b), "data: [DONE]\n\n"...)
}

func sseEvent(data []byte) []byte {
	out := make([]byte, 0, len(data)+8)
	out = append(out, "data: "...)
	out = append(out, data...)
	return append(out, '\n', '\n')
}
