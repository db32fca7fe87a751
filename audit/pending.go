package audit

import (
	"context"
	"fmt"
)

// The trail as the front doors see it: an entry handed over (Pending) and
// waited for, and the Writer interface a Log and its wrappers serve.

// Pending is an append handed to the writer and not yet known durable.
type Pending struct {
	req  *request
	done result
	got  bool
}

// Completed is a Pending whose outcome is already known, for wrappers of a
// Log that decide an append themselves.
func Completed(e Entry, err error) *Pending {
	return &Pending{done: result{e: e, err: err}, got: true}
}

// Appender appends one entry and returns once it is durable.
type Appender interface {
	Append(ctx context.Context, r Record) (Entry, error)
}

// Writer is the trail as the front doors write to it: a Log, or what
// passes entries on to one (sourceguard.Guard). Submit and TrySubmit
// queue an entry without waiting for it; Begin and its end bracket an
// exchange for the commit delay.
type Writer interface {
	Appender
	Submit(ctx context.Context, r Record) (*Pending, error)
	TrySubmit(r Record) (*Pending, error)
	Begin() (end func())
}

var _ Writer = (*Log)(nil)

// WriterOf returns a as a Writer: a itself when it is one, else a Writer
// that appends each entry at once (a trail held in memory by tests).
func WriterOf(a Appender) Writer {
	if w, ok := a.(Writer); ok {
		return w
	}
	return appendNow{a}
}

// appendNow is a plain Appender as a Writer: every entry is appended when
// it is submitted.
type appendNow struct{ Appender }

func (a appendNow) Submit(ctx context.Context, r Record) (*Pending, error) {
	e, err := a.Append(ctx, r)
	if err != nil {
		return nil, err
	}
	return Completed(e, nil), nil
}

func (a appendNow) TrySubmit(r Record) (*Pending, error) { return a.Submit(context.Background(), r) }

func (a appendNow) Begin() (end func()) { return func() {} }

// Wait returns once the entry is durable (or its write failed), or ctx
// ends first (the entry may then still be written). Later calls return the
// same result. A Pending is for one goroutine.
func (p *Pending) Wait(ctx context.Context) (Entry, error) {
	if p.got {
		return p.done.e, p.done.err
	}
	select {
	case <-p.req.g.done:
		p.done, p.got = p.req.res, true
		return p.done.e, p.done.err
	case <-ctx.Done():
		return Entry{}, fmt.Errorf("audit append: %w (the entry may still be written)", ctx.Err())
	}
}
