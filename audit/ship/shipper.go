package ship

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/egress"
)

// metaSHA256 is the user metadata holding an object's whole-content
// SHA-256 (hex): what a later pass, or a restart, compares to decide that
// a file is already there. Content-MD5 makes the server check the bytes
// on the way in.
const metaSHA256 = "X-Amz-Meta-Sha256"

// Stats are the shipper's numbers for metrics.
type Stats struct {
	BacklogFiles int64     // closed files (and checkpoint pieces) not shipped yet
	BacklogBytes int64     // their bytes
	LastSuccess  time.Time // end of the last pass that shipped everything it found; zero if none yet
	Uploads      uint64    // objects uploaded
	Errors       uint64    // passes that stopped on an error
}

// Shipper uploads one audit directory's closed segments, torn files and
// checkpoints to object storage under prefix/<chain>/.
type Shipper struct {
	st        *store
	dir       string
	interval  time.Duration
	retention *Retention
	log       *slog.Logger

	mu       sync.Mutex // one pass at a time; guards cur and listed
	cur      *cursor
	listed   map[string]bool // chains whose checkpoint pieces were listed this process
	backlogN atomic.Int64
	backlogB atomic.Int64
	lastOK   atomic.Int64 // unix ns
	uploads  atomic.Uint64
	errs     atomic.Uint64
}

// New returns a shipper of dir to cfg (validated). policy guards its
// connections (nil: unguarded, for tests and the command line).
func New(cfg Config, dir string, policy *egress.Policy, log *slog.Logger) (*Shipper, error) {
	st, err := newStore(cfg, policy)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	cur, err := loadCursor(dir, cfg.URL)
	if err != nil {
		return nil, err
	}
	interval := cfg.Interval
	if interval <= 0 {
		interval = defaultInterval
	}
	return &Shipper{st: st, dir: dir, interval: interval, retention: cfg.Retention, cur: cur, listed: map[string]bool{},
		log: log.With("component", "audit.ship", "to", cfg.URL)}, nil
}

// Stats returns the numbers so far.
func (s *Shipper) Stats() Stats {
	st := Stats{BacklogFiles: s.backlogN.Load(), BacklogBytes: s.backlogB.Load(), Uploads: s.uploads.Load(), Errors: s.errs.Load()}
	if ns := s.lastOK.Load(); ns != 0 {
		st.LastSuccess = time.Unix(0, ns)
	}
	return st
}

// Run ships at once and then every interval until ctx ends. Errors are
// logged and retried at the next pass: the local trail keeps everything.
func (s *Shipper) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		if err := s.Pass(ctx, false); err != nil && ctx.Err() == nil {
			s.log.Warn("audit shipping failed; retrying at the next pass", "error", err.Error(), "backlog_files", s.backlogN.Load())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Final ships everything there is, the last (open) segment of each chain
// included: for a gateway shutting down, after its audit log closed.
// ctx bounds it (the pod's termination grace period).
func (s *Shipper) Final(ctx context.Context) error {
	err := s.Pass(ctx, true)
	if err != nil {
		s.log.Error("audit shipping at shutdown did not finish; the rest stays in the local trail", "error", err.Error(),
			"backlog_files", s.backlogN.Load(), "backlog_bytes", s.backlogB.Load())
	}
	return err
}

// localFile is a file of the directory to ship.
type localFile struct {
	chain string
	name  string
	size  int64
	upTo  int64 // checkpoints: ship the lines up to this seq
}

// todo lists what a pass ships, chain by chain: segments and torn files
// first, then the checkpoints, so a checkpoint is never in the bucket
// before the entries it covers. Without final, the newest segment of each
// chain (the one being written) waits.
func (s *Shipper) todo(final bool) (files []localFile, cps []localFile, err error) {
	files, cps, err = s.scan()
	if err != nil || final {
		return files, cps, err
	}
	last := map[string]int{} // chain -> index in files of its newest segment
	for i, f := range files {
		if _, kind := audit.ParseFileName(f.name); kind == audit.FileSegment {
			last[f.chain] = i // scan sorts by name, and segment names sort by first seq
		}
	}
	held := map[int]bool{}
	for _, i := range last {
		held[i] = true
		// The checkpoints shipped must not go past the entries shipped,
		// so the bucket always verifies as it stands.
		for j := range cps {
			if cps[j].chain == files[i].chain {
				cps[j].upTo = segmentFirstSeq(files[i].name) - 1
			}
		}
	}
	kept := files[:0]
	for i, f := range files {
		if !held[i] {
			kept = append(kept, f)
		}
	}
	return kept, cps, nil
}

// scan lists the trail files of the directory, sorted by name.
func (s *Shipper) scan() (files []localFile, cps []localFile, err error) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read audit dir: %w", err)
	}
	for _, de := range des {
		if !de.Type().IsRegular() {
			continue
		}
		chain, kind := audit.ParseFileName(de.Name())
		if kind == audit.FileOther {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		f := localFile{chain: chain, name: de.Name(), size: fi.Size(), upTo: math.MaxInt64}
		if kind == audit.FileCheckpoints {
			cps = append(cps, f)
		} else {
			files = append(files, f)
		}
	}
	return files, cps, nil
}

// segmentFirstSeq reads the seq out of <chain>-<20 digits>.jsonl.
func segmentFirstSeq(name string) int64 {
	n, _ := strconv.ParseInt(name[len(name)-26:len(name)-6], 10, 64)
	return n
}

// Pass ships what is not shipped yet and returns the first error; what
// it did ship stays recorded.
func (s *Shipper) Pass(ctx context.Context, final bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	files, cps, err := s.todo(final)
	if err == nil {
		err = s.listCheckpoints(ctx, cps)
	}
	if err != nil {
		s.errs.Add(1)
		return err
	}
	var pending []localFile
	var n, b int64
	for _, f := range files {
		if s.cur.Files[f.name].Size != f.size {
			pending = append(pending, f)
			n, b = n+1, b+f.size
		}
	}
	for _, f := range cps {
		if d := f.size - s.cur.Checkpoints[f.chain]; d > 0 {
			n, b = n+1, b+d
		}
	}
	s.backlogN.Store(n)
	s.backlogB.Store(b)
	for _, f := range pending {
		if err := s.shipFile(ctx, f); err != nil {
			s.errs.Add(1)
			return err
		}
		s.backlogN.Add(-1)
		s.backlogB.Add(-f.size)
	}
	for _, f := range cps {
		if err := s.shipCheckpoints(ctx, f); err != nil {
			s.errs.Add(1)
			return err
		}
	}
	s.backlogN.Store(0)
	s.backlogB.Store(0)
	s.lastOK.Store(time.Now().UnixNano())
	return nil
}

// shipFile uploads a segment or torn file unless the bucket has it with
// the same content already (an upload a crash kept from being recorded).
func (s *Shipper) shipFile(ctx context.Context, f localFile) error {
	file, err := os.Open(filepath.Join(s.dir, f.name))
	if err != nil {
		return fmt.Errorf("ship %s: %w", f.name, err)
	}
	defer file.Close()
	body := io.NewSectionReader(file, 0, f.size)
	h := sha256.New()
	if _, err := io.Copy(h, body); err != nil {
		return fmt.Errorf("ship %s: %w", f.name, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	key := s.st.key(f.chain + "/" + f.name)
	if err := s.put(ctx, key, body, f.size, sum); err != nil {
		return fmt.Errorf("ship %s: %w", f.name, err)
	}
	s.cur.Files[f.name] = shipped{Size: f.size, SHA256: sum}
	return s.cur.save()
}

// shipCheckpoints uploads the whole lines added to a checkpoints file
// since the last piece, as the piece checkpoints/<offset>.jsonl: each
// piece is written once and never replaced, unlike the growing file.
func (s *Shipper) shipCheckpoints(ctx context.Context, f localFile) error {
	off := s.cur.Checkpoints[f.chain]
	if f.size < off {
		return fmt.Errorf("ship %s: the file is shorter (%d bytes) than what was shipped (%d)", f.name, f.size, off)
	}
	if f.size == off {
		return nil
	}
	file, err := os.Open(filepath.Join(s.dir, f.name))
	if err != nil {
		return fmt.Errorf("ship %s: %w", f.name, err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.NewSectionReader(file, off, f.size-off))
	if err != nil {
		return fmt.Errorf("ship %s: %w", f.name, err)
	}
	data = wholeLinesUpTo(data, f.upTo)
	if len(data) == 0 {
		return nil
	}
	sum := sha256.Sum256(data)
	if err := s.put(ctx, s.st.key(pieceKey(f.chain, off)), bytes.NewReader(data), int64(len(data)), hex.EncodeToString(sum[:])); err != nil {
		return fmt.Errorf("ship %s: %w", f.name, err)
	}
	s.cur.Checkpoints[f.chain] = off + int64(len(data))
	s.backlogN.Add(-1)
	s.backlogB.Add(-int64(len(data)))
	return s.cur.save()
}

// wholeLinesUpTo cuts data before its first checkpoint beyond seq upTo,
// or its last line without a newline (being written).
func wholeLinesUpTo(data []byte, upTo int64) []byte {
	n := 0
	for n < len(data) {
		i := bytes.IndexByte(data[n:], '\n')
		if i < 0 {
			break
		}
		var cp struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal(data[n:n+i], &cp) == nil && cp.Seq > upTo {
			break
		}
		n += i + 1
	}
	return data[:n]
}

// pieceKey is where the checkpoint lines from byte off of chain's
// checkpoints file go, under the prefix.
func pieceKey(chain string, off int64) string {
	return fmt.Sprintf("%s/%s%020d.jsonl", chain, piecesDir, off)
}

const piecesDir = "checkpoints/"

// listCheckpoints sets, once per process and chain, where the chain's
// checkpoint pieces in the bucket end, so a cursor lost or stale after a
// crash never makes a piece that overlaps one already there.
func (s *Shipper) listCheckpoints(ctx context.Context, cps []localFile) error {
	for _, f := range cps {
		if s.listed[f.chain] {
			continue
		}
		pieces, err := s.st.list(ctx, f.chain+"/"+piecesDir)
		if err != nil {
			return fmt.Errorf("list the checkpoints of chain %s: %w", f.chain, err)
		}
		end, _ := contiguous(pieces)
		if end > s.cur.Checkpoints[f.chain] {
			s.cur.Checkpoints[f.chain] = end
		}
		s.listed[f.chain] = true
	}
	return nil
}

// put uploads body as key unless an object with the same size and SHA-256
// is there already.
func (s *Shipper) put(ctx context.Context, key string, body io.ReadSeeker, size int64, sum string) error {
	cctx, cancel := s.st.callCtx(ctx, 0)
	info, err := s.st.c.StatObject(cctx, s.st.bucket, key, minio.StatObjectOptions{})
	cancel()
	switch {
	case err == nil && info.Size == size && info.Metadata.Get(metaSHA256) == sum:
		return nil
	case err != nil && minio.ToErrorResponse(err).Code != minio.NoSuchKey:
		return fmt.Errorf("stat %s: %w", key, err)
	}
	if _, err := body.Seek(0, io.SeekStart); err != nil {
		return err
	}
	opts := minio.PutObjectOptions{SendContentMd5: true, ContentType: "application/x-ndjson",
		UserMetadata: map[string]string{"sha256": sum}}
	if r := s.retention; r != nil {
		opts.Mode = minio.Governance
		if r.Mode == "compliance" {
			opts.Mode = minio.Compliance
		}
		opts.RetainUntilDate = time.Now().UTC().Add(time.Duration(r.Days) * 24 * time.Hour)
	}
	cctx, cancel = s.st.callCtx(ctx, size)
	defer cancel()
	if _, err := s.st.c.PutObject(cctx, s.st.bucket, key, body, size, opts); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	s.uploads.Add(1)
	return nil
}

// object is one listed object, its key relative to the prefix.
type object struct {
	name string
	size int64
}

// list returns the objects under prefix/under, sorted by key.
func (st *store) list(ctx context.Context, under string) ([]object, error) {
	cctx, cancel := st.callCtx(ctx, 0)
	defer cancel()
	base := st.key("")
	var out []object
	for info := range st.c.ListObjects(cctx, st.bucket, minio.ListObjectsOptions{Prefix: st.key(under), Recursive: true}) {
		if info.Err != nil {
			return nil, info.Err
		}
		out = append(out, object{name: info.Key[len(base):], size: info.Size})
	}
	if err := cctx.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// contiguous returns where a chain's checkpoint pieces (sorted) end, and
// the first hole or overlap between two of them, if any.
func contiguous(pieces []object) (end int64, bad error) {
	for _, p := range pieces {
		off, ok := pieceOffset(p.name)
		if !ok {
			continue
		}
		switch {
		case off > end && bad == nil:
			bad = fmt.Errorf("checkpoint bytes %d to %d are missing (no object %s%020d.jsonl)", end, off-1, piecesDir, end)
		case off < end && bad == nil:
			bad = fmt.Errorf("checkpoint piece %s overlaps the one before it", p.name)
		}
		end = max(end, off+p.size)
	}
	return end, bad
}

// pieceOffset reads the offset out of ".../checkpoints/<20 digits>.jsonl".
func pieceOffset(name string) (int64, bool) {
	base := filepath.Base(name)
	if len(base) != 26 || filepath.Ext(base) != ".jsonl" {
		return 0, false
	}
	off, err := strconv.ParseUint(base[:20], 10, 63)
	return int64(off), err == nil
}
