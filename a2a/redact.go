package a2a

import (
	"encoding/json"
	"fmt"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/sacpgw/gateway/redact"
)

// scrubber redacts A2A objects in place: the text of text parts, every
// string (and member name) of data parts and metadata, file names and
// URLs, artifacts' names and descriptions. Raw bytes are not text and are
// left alone. res adds up what was found; err is the first failure.
type scrubber struct {
	red *redact.Redactor
	res redact.Result
	err error
}

func (s *scrubber) str(p *string) {
	if *p == "" {
		return
	}
	out, r := s.red.String(*p)
	s.res.Add(r)
	*p = out
}

// value redacts a JSON value (a data part's, a metadata member's) through
// its JSON form.
func (s *scrubber) value(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		s.fail(fmt.Errorf("redact: encode: %w", err))
		return nil
	}
	out, r, err := s.red.JSON(raw)
	if err != nil {
		s.fail(fmt.Errorf("redact: %w", err))
		return nil
	}
	s.res.Add(r)
	var back any
	if err := json.Unmarshal(out, &back); err != nil {
		s.fail(fmt.Errorf("redact: decode: %w", err))
		return nil
	}
	return back
}

func (s *scrubber) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *scrubber) meta(m map[string]any) map[string]any {
	if len(m) == 0 {
		return m
	}
	out, _ := s.value(m).(map[string]any)
	return out
}

func (s *scrubber) parts(ps sdk.ContentParts) {
	for _, p := range ps {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case sdk.Text:
			t := string(c)
			s.str(&t)
			p.Content = sdk.Text(t)
		case sdk.Data:
			p.Content = sdk.Data{Value: s.value(c.Value)}
		case sdk.URL:
			u := string(c)
			s.str(&u)
			p.Content = sdk.URL(u)
		}
		s.str(&p.Filename)
		p.Metadata = s.meta(p.Metadata)
	}
}

func (s *scrubber) message(m *sdk.Message) {
	if m == nil {
		return
	}
	s.parts(m.Parts)
	m.Metadata = s.meta(m.Metadata)
}

func (s *scrubber) artifact(a *sdk.Artifact) {
	if a == nil {
		return
	}
	s.str(&a.Name)
	s.str(&a.Description)
	s.parts(a.Parts)
	a.Metadata = s.meta(a.Metadata)
}

func (s *scrubber) task(t *sdk.Task) {
	if t == nil {
		return
	}
	s.message(t.Status.Message)
	for _, m := range t.History {
		s.message(m)
	}
	for _, a := range t.Artifacts {
		s.artifact(a)
	}
	t.Metadata = s.meta(t.Metadata)
}

// event redacts whatever an agent sent: a task, a message or an update.
func (s *scrubber) event(ev sdk.Event) {
	switch e := ev.(type) {
	case *sdk.Task:
		s.task(e)
	case *sdk.Message:
		s.message(e)
	case *sdk.TaskStatusUpdateEvent:
		s.message(e.Status.Message)
		e.Metadata = s.meta(e.Metadata)
	case *sdk.TaskArtifactUpdateEvent:
		s.artifact(e.Artifact)
		e.Metadata = s.meta(e.Metadata)
	}
}

// scrub redacts ev with red (nil: off) and returns what it found.
func scrub(red *redact.Redactor, ev sdk.Event) (redact.Result, error) {
	if red == nil || ev == nil {
		return redact.Result{}, nil
	}
	s := &scrubber{red: red}
	s.event(ev)
	return s.res, s.err
}
