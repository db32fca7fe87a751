package policy

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Hot reload. fsnotify watches directories, not files, and is not recursive:
// every directory below Dir (and ShadowDir) is added, and directories created
// later are added when their Create event arrives. Watching directories is
// what survives editors that save by writing a temporary file and renaming it
// over the original (vim, JetBrains, sed -i) and Kubernetes' ConfigMap
// updates, which swap a ..data symlink.

// Reload reloads the live policies (and the shadow ones, if configured) now,
// as the watcher does after a change. It returns the live directory's error,
// if any, after keeping the last good policies. Files that did not change
// are not recompiled and report nothing.
func (e *Engine) Reload() error {
	var err error
	if e.opts.Dir != "" {
		err = e.reload(false)
	}
	if e.opts.ShadowDir != "" {
		_ = e.reload(true)
	}
	return err
}

// reload loads one directory, swaps it in if it compiles, and reports the
// attempt to OnReload (outside the lock, so the callback may call Reload).
func (e *Engine) reload(shadow bool) error {
	ev, changed, err := e.reloadLocked(shadow)
	if changed && e.opts.OnReload != nil {
		e.opts.OnReload(ev)
	}
	return err
}

func (e *Engine) reloadLocked(shadow bool) (ReloadEvent, bool, error) {
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	dir, ptr, failed := e.opts.Dir, &e.live, &e.liveFailed
	if shadow {
		dir, ptr, failed = e.opts.ShadowDir, &e.shadow, &e.shadowFailed
	}
	cur := ptr.Load()
	files, err := readFiles(os.DirFS(dir), dir)
	var p *prepared
	attempted := ""
	if err == nil {
		attempted = revisionOf(files)
		if attempted == cur.revision && !*failed {
			return ReloadEvent{}, false, nil // no change: touch, chmod, an editor's swap file
		}
		p, err = compile(context.Background(), files)
		if err == nil && !e.opts.SkipSmokeTest {
			err = smokeTest(context.Background(), p, cur, e.opts.Timeout)
		}
	}
	ev := ReloadEvent{OK: err == nil, Shadow: shadow, Dir: dir, Attempted: attempted, At: time.Now().UTC()}
	for _, f := range files {
		ev.Files = append(ev.Files, f.rel)
	}
	kind := "policy"
	if shadow {
		kind = "shadow policy"
	}
	if err != nil {
		*failed = true
		ev.Revision = cur.revision
		ev.Error = errorText(err)
		if shadow {
			e.shadowReloadFailures.Add(1)
		} else {
			e.reloadFailures.Add(1)
			e.lastErr.Store(&ev.Error)
		}
		e.log.Error(kind+" reload failed; the last good policies keep serving",
			"dir", dir, "revision", cur.revision, "error", ev.Error)
		err = &LoadError{Dir: dir, Shadow: shadow, Text: ev.Error, Err: err}
	} else {
		*failed = false
		if !shadow {
			p.warmFrom(cur)
		}
		ptr.Store(p)
		ev.Revision = p.revision
		if shadow {
			e.shadowReloads.Add(1)
		} else {
			e.reloads.Add(1)
			e.lastErr.Store(nil)
		}
		e.log.Info(kind+" reloaded", "dir", dir, "revision", p.revision, "previous", cur.revision, "files", len(files))
	}
	return ev, true, err
}

// watch starts the watcher goroutine.
func (e *Engine) watch() error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	var roots []string
	for _, r := range []string{e.opts.Dir, e.opts.ShadowDir} {
		if r != "" {
			roots = append(roots, r)
		}
	}
	for _, r := range roots {
		if err := addTree(w, r); err != nil {
			_ = w.Close()
			return err
		}
	}
	e.wg.Add(1)
	go e.watchLoop(w)
	return nil
}

// addTree watches root and every directory below it, except hidden ones.
func addTree(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != root && errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			return fs.SkipDir
		}
		return w.Add(p)
	})
}

func (e *Engine) watchLoop(w *fsnotify.Watcher) {
	defer e.wg.Done()
	defer w.Close()
	// One debounce timer per directory; stopped until a change arrives.
	timers := [2]*time.Timer{time.NewTimer(time.Hour), time.NewTimer(time.Hour)}
	for _, t := range timers {
		t.Stop()
	}
	for {
		select {
		case <-e.done:
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() && !strings.HasPrefix(filepath.Base(ev.Name), ".") {
					if err := addTree(w, ev.Name); err != nil {
						e.log.Warn("policy watch: cannot watch new directory", "dir", ev.Name, "error", err)
					}
				}
			}
			if !relevant(ev) {
				continue
			}
			i := 0
			if e.opts.ShadowDir != "" && within(ev.Name, e.opts.ShadowDir) {
				i = 1
			}
			timers[i].Reset(e.opts.Debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			e.log.Warn("policy watch error", "error", err)
		case <-timers[0].C:
			_ = e.reload(false)
		case <-timers[1].C:
			_ = e.reload(true)
		}
	}
}

// relevant filters events that may change the loaded policies; anything in
// doubt counts (a reload of unchanged files is a cheap no-op).
func relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	base := filepath.Base(ev.Name)
	switch {
	case strings.HasPrefix(base, ".."): // Kubernetes ConfigMap swap
		return true
	case strings.HasSuffix(base, ".rego"):
		return !strings.HasSuffix(base, "_test.rego")
	case filepath.Ext(base) == "":
		// A directory created, removed or renamed (its files come or go).
		return ev.Has(fsnotify.Create) || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)
	}
	return false
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
