package ship

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/egress"
)

// Trail is a trail read back from object storage: an fs.FS whose root
// holds every chain's files by their own names, as an audit directory
// would, for audit.VerifyFS and audit.ExportFS. A chain's checkpoint
// pieces read as its one checkpoints file.
type Trail struct {
	st       *store
	ctx      context.Context
	files    map[string][]object // file name -> its objects (several: checkpoint pieces)
	names    []string
	problems []audit.Failure
}

// OpenTrail lists everything under cfg's prefix. The objects are read
// later, as the verify or export asks for them, each within a deadline
// (ctx bounds them all).
func OpenTrail(ctx context.Context, cfg Config, policy *egress.Policy) (*Trail, error) {
	st, err := newStore(cfg, policy)
	if err != nil {
		return nil, err
	}
	objs, err := st.list(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", cfg.URL, err)
	}
	t := &Trail{st: st, ctx: ctx}
	t.files, t.problems = arrange(objs, st.key)
	for name := range t.files {
		t.names = append(t.names, name)
	}
	sort.Strings(t.names)
	sort.Slice(t.problems, func(i, j int) bool { return t.problems[i].Chain < t.problems[j].Chain })
	return t, nil
}

// arrange sorts a listing (names relative to the prefix) into the files
// of an audit directory, and the problems the listing alone shows. key
// gives an object's full key, for the problems.
func arrange(objs []object, key func(string) string) (map[string][]object, []audit.Failure) {
	files := map[string][]object{}
	var problems []audit.Failure
	pieces := map[string][]object{}
	for _, o := range objs {
		dir, rest, ok := strings.Cut(o.name, "/")
		if !ok {
			continue // not in a chain's prefix: not the trail's
		}
		if p, isPiece := strings.CutPrefix(rest, piecesDir); isPiece {
			if _, ok := pieceOffset(p); ok && !strings.Contains(p, "/") {
				pieces[dir] = append(pieces[dir], o)
			}
			continue
		}
		chain, kind := audit.ParseFileName(rest)
		switch {
		case kind == audit.FileOther || strings.Contains(rest, "/"):
			// Not a trail file (Verify ignores those in a directory too).
		case chain != dir:
			problems = append(problems, audit.Failure{Chain: chain, File: key(o.name),
				Reason: fmt.Sprintf("a file of chain %q under the prefix of chain %q", chain, dir)})
		default:
			files[rest] = []object{o}
		}
	}
	for dir, ps := range pieces {
		if _, kind := audit.ParseFileName(audit.CheckpointsFileName(dir)); kind != audit.FileCheckpoints {
			continue // not a chain's prefix
		}
		if _, bad := contiguous(ps); bad != nil {
			problems = append(problems, audit.Failure{Chain: dir, File: key(dir + "/" + piecesDir), Reason: bad.Error()})
		}
		files[audit.CheckpointsFileName(dir)] = ps
	}
	return files, problems
}

// Problems are what the listing alone shows wrong: a file under another
// chain's prefix, checkpoint pieces with a hole between them.
func (t *Trail) Problems() []audit.Failure { return t.problems }

// Open opens a file (or "."), per fs.FS.
func (t *Trail) Open(name string) (fs.File, error) {
	if name == "." {
		return &dirFile{t: t}, nil
	}
	objs, ok := t.files[name]
	if !ok || !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	var size int64
	for _, o := range objs {
		size += o.size
	}
	ctx, cancel := t.st.callCtx(t.ctx, size)
	readers := make([]io.Reader, len(objs))
	for i, o := range objs {
		obj, err := t.st.c.GetObject(ctx, t.st.bucket, t.st.key(o.name), minio.GetObjectOptions{})
		if err != nil {
			cancel()
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		readers[i] = obj
	}
	return &remoteFile{info: fileInfo{name: name, size: size}, r: io.MultiReader(readers...), cancel: cancel}, nil
}

// ReadDir lists the root, per fs.ReadDirFS.
func (t *Trail) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	out := make([]fs.DirEntry, 0, len(t.names))
	for _, n := range t.names {
		var size int64
		for _, o := range t.files[n] {
			size += o.size
		}
		out = append(out, fs.FileInfoToDirEntry(fileInfo{name: n, size: size}))
	}
	return out, nil
}

type remoteFile struct {
	info   fileInfo
	r      io.Reader
	cancel context.CancelFunc
}

func (f *remoteFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *remoteFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *remoteFile) Close() error               { f.cancel(); return nil }

type dirFile struct{ t *Trail }

func (d *dirFile) Stat() (fs.FileInfo, error) { return fileInfo{name: ".", dir: true}, nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: fs.ErrInvalid}
}
func (d *dirFile) Close() error { return nil }
func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if n > 0 {
		return nil, &fs.PathError{Op: "readdir", Path: ".", Err: fs.ErrInvalid}
	}
	return d.t.ReadDir(".")
}

type fileInfo struct {
	name string
	size int64
	dir  bool
}

func (fi fileInfo) Name() string { return fi.name }
func (fi fileInfo) Size() int64  { return fi.size }
func (fi fileInfo) Mode() fs.FileMode {
	if fi.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (fi fileInfo) ModTime() time.Time { return time.Time{} }
func (fi fileInfo) IsDir() bool        { return fi.dir }
func (fi fileInfo) Sys() any           { return nil }

// Verify verifies every chain of t (audit.VerifyFS) and adds what the
// listing showed wrong to the report's failures.
func (t *Trail) Verify(o audit.Options) (audit.Report, error) {
	rep, err := audit.VerifyFS(t, o)
	if err != nil && !audit.IsFailure(err) {
		return rep, err
	}
	for _, p := range t.problems {
		rep.Failures = append(rep.Failures, p)
		for i := range rep.Chains {
			if rep.Chains[i].Chain == p.Chain && rep.Chains[i].Failure == nil {
				rep.Chains[i].Failure = &p
			}
		}
	}
	if len(rep.Failures) > 0 {
		return rep, &rep.Failures[0]
	}
	return rep, nil
}

// Unfinished are the chains of rep whose last entries no checkpoint
// covers: a gateway that stopped without its final checkpoint (killed, or
// its pod gone before the last segment shipped). Their ends are not
// attested: entries after the last checkpoint could be missing unseen.
func Unfinished(rep audit.Report) []string {
	var out []string
	for _, c := range rep.Chains {
		switch cp := c.LastCheckpoint; {
		case c.Failure != nil:
		case cp == nil:
			out = append(out, fmt.Sprintf("chain %s has no checkpoint (last seq %d)", c.Chain, c.LastSeq))
		case cp.Seq < c.LastSeq:
			out = append(out, fmt.Sprintf("chain %s stopped without a final checkpoint: seqs %d-%d are after its last checkpoint (seq %d)",
				c.Chain, cp.Seq+1, c.LastSeq, cp.Seq))
		}
	}
	return out
}
