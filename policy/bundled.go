package policy

import (
	"context"
	"path"
	"sync"
	"time"

	"github.com/sacpgw/gateway/policy/bundle"
)

// A signed OPA bundle as the live policies (Options.Bundle). The engine
// polls the source; a bundle that does not fetch, verify, compile or pass
// the smoke test is refused and the last good one keeps deciding, exactly
// as a rejected edit of the policy directory is.

// BundleStatus is the state of the policy bundle, for /review/ops.
type BundleStatus struct {
	// Source is where the bundle comes from, without credentials; "" when
	// the policies come from a directory.
	Source string `json:"source,omitempty"`
	// Revision is the .manifest revision of the bundle that serves.
	Revision string `json:"revision,omitempty"`
	// Error is why the newest attempt was refused ("" when it loaded or
	// nothing changed): the bundle of Revision still decides.
	Error string `json:"error,omitempty"`
	// Checked is when the source was last asked.
	Checked time.Time `json:"checked"`
}

// bundleState is the engine's bundle bookkeeping, guarded by mu (held for
// a whole poll, so that two never race to swap).
type bundleState struct {
	mu     sync.Mutex
	tag    string // the Tag of the bundle in use
	status BundleStatus
}

// Bundle reports the policy bundle's state; the zero value without one.
func (e *Engine) Bundle() BundleStatus {
	if e.opts.Bundle == nil {
		return BundleStatus{}
	}
	e.bundle.mu.Lock()
	defer e.bundle.mu.Unlock()
	return e.bundle.status
}

// PollBundle asks the source for a newer bundle now, as the poller does
// on its interval, and returns why one was refused (nil when it loaded or
// nothing changed). Without a bundle source it does nothing.
func (e *Engine) PollBundle(ctx context.Context) error {
	if e.opts.Bundle == nil {
		return nil
	}
	ev, changed, err := e.pollBundle(ctx)
	if changed && e.opts.OnReload != nil {
		e.opts.OnReload(ev)
	}
	return err
}

// firstBundle loads the bundle New starts with: without it the gateway
// does not start, as with a policy directory that does not compile.
func (e *Engine) firstBundle(ctx context.Context) (*prepared, error) {
	src := e.opts.Bundle
	e.bundle.status.Source = src.Display()
	b, err := src.Fetch(ctx, "")
	e.bundle.status.Checked = time.Now().UTC()
	if err != nil {
		return nil, err
	}
	p, err := e.prepareBundle(ctx, b, nil)
	if err != nil {
		return nil, err
	}
	e.bundle.tag, e.bundle.status.Revision = b.Tag, b.Revision
	return p, nil
}

// prepareBundle compiles a verified bundle's files and smoke-tests them
// against the policies in use (prev).
func (e *Engine) prepareBundle(ctx context.Context, b *bundle.Bundle, prev *prepared) (*prepared, error) {
	p, err := compile(ctx, bundleFiles(b))
	if err == nil && !e.opts.SkipSmokeTest {
		err = smokeTest(ctx, p, prev, e.opts.Timeout)
	}
	return p, err
}

// bundleFiles are a bundle's modules as the compiler takes them; errors
// name them bundle/<path>.
func bundleFiles(b *bundle.Bundle) []regoFile {
	files := make([]regoFile, len(b.Files))
	for i, f := range b.Files {
		files[i] = regoFile{rel: f.Path, name: path.Join("bundle", f.Path), data: f.Data}
	}
	return files
}

// pollBundle fetches, and swaps in a bundle that loads. The reported event
// says what was attempted; changed is false when the source had nothing
// new.
func (e *Engine) pollBundle(ctx context.Context) (ReloadEvent, bool, error) {
	src := e.opts.Bundle
	e.bundle.mu.Lock()
	defer e.bundle.mu.Unlock()
	st := &e.bundle.status
	b, err := src.Fetch(ctx, e.bundle.tag)
	st.Checked = time.Now().UTC()
	if err == nil && b == nil {
		st.Error = "" // the source is back and still serves the bundle in use
		e.lastErr.Store(nil)
		return ReloadEvent{}, false, nil
	}
	cur := e.live.Load()
	ev := ReloadEvent{Dir: src.Display(), At: st.Checked, Revision: cur.revision, BundleRevision: st.Revision}
	var p *prepared
	if err == nil {
		for _, f := range b.Files {
			ev.Files = append(ev.Files, f.Path)
		}
		ev.Attempted = revisionOf(bundleFiles(b))
		if ev.Attempted == cur.revision {
			// The same Rego again (a server without ETags, a new
			// manifest only): nothing to compile, nothing to report.
			e.bundle.tag, st.Revision, st.Error = b.Tag, b.Revision, ""
			e.lastErr.Store(nil)
			return ReloadEvent{}, false, nil
		}
		p, err = e.prepareBundle(ctx, b, cur)
	}
	if err != nil {
		ev.Error = errorText(err)
		// The same refusal again at the next poll (the bad bundle is
		// still served, the server still down) is counted, not reported
		// anew: one audit entry and one error line per distinct problem.
		repeat := st.Error == ev.Error
		st.Error = ev.Error
		msg := "policy bundle refused: " + ev.Error
		e.lastErr.Store(&msg)
		e.reloadFailures.Add(1)
		if !repeat {
			e.log.Error("policy bundle refused; the last good policies keep serving",
				"source", src.Display(), "bundle_revision", st.Revision, "revision", cur.revision, "error", ev.Error)
		}
		return ev, !repeat, &LoadError{Dir: src.Display(), Text: ev.Error, Err: err}
	}
	p.warmFrom(cur)
	e.reloadMu.Lock()
	e.live.Store(p)
	e.reloadMu.Unlock()
	e.bundle.tag, st.Revision, st.Error = b.Tag, b.Revision, ""
	e.lastErr.Store(nil)
	e.reloads.Add(1)
	ev.OK, ev.Revision, ev.BundleRevision = true, p.revision, b.Revision
	e.log.Info("policy bundle loaded", "source", src.Display(), "bundle_revision", b.Revision,
		"revision", p.revision, "previous", cur.revision, "files", len(b.Files))
	return ev, true, nil
}

// bundleLoop polls the source until Close.
func (e *Engine) bundleLoop() {
	defer e.wg.Done()
	t := time.NewTicker(e.opts.Bundle.Polling())
	defer t.Stop()
	for {
		select {
		case <-e.done:
			return
		case <-t.C:
			_ = e.PollBundle(e.ctx) // logged, counted and shown by pollBundle
		}
	}
}
