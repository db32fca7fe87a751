package audit

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// File names in an audit directory:
//
//	<chain>-<first seq, 20 digits>.jsonl   a segment
//	<chain>.checkpoints.jsonl              the chain's checkpoints
//	<file>.<byte offset>.torn              bytes a crash left torn in <file>, moved aside
//	<chain>.lock                           held by the process writing the chain
//
// Anything else is ignored. The offset in a torn file's name is where the
// torn bytes started, so repeated recoveries of one segment never collide.
var (
	chainRE   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
	segmentRE = regexp.MustCompile(`^(.+)-([0-9]{20})\.jsonl$`)
	tornRE    = regexp.MustCompile(`^(.+)\.([0-9]+)\.torn$`)
)

const checkpointSuffix = ".checkpoints.jsonl"

func segmentName(chain string, firstSeq int64) string {
	return fmt.Sprintf("%s-%020d.jsonl", chain, firstSeq)
}

func checkpointName(chain string) string { return chain + checkpointSuffix }

func tornName(file string, off int64) string { return fmt.Sprintf("%s.%d.torn", file, off) }

func validChain(chain string) error {
	if !chainRE.MatchString(chain) {
		return fmt.Errorf("chain %q: want 1-128 letters, digits, '.', '_' or '-', not starting with '.' or '-'", chain)
	}
	return nil
}

type segmentFile struct {
	name     string
	firstSeq int64
}

type tornFile struct {
	name   string
	source string // the segment or checkpoints file the bytes were torn from
	offset int64
}

// chainFiles is what a directory holds for one chain.
type chainFiles struct {
	chain       string
	segments    []segmentFile // by first seq
	checkpoints string        // file name, empty if none
	torn        []tornFile    // by name
}

// scanDir groups the audit files in dir by chain, chains sorted by name.
func scanDir(dir string) ([]*chainFiles, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read audit dir: %w", err)
	}
	return groupFiles(des), nil
}

// scanFS is scanDir over the root of fsys (a trail shipped elsewhere).
func scanFS(fsys fs.FS) ([]*chainFiles, error) {
	des, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read audit trail: %w", err)
	}
	return groupFiles(des), nil
}

func groupFiles(des []fs.DirEntry) []*chainFiles {
	byChain := map[string]*chainFiles{}
	get := func(chain string) *chainFiles {
		c := byChain[chain]
		if c == nil {
			c = &chainFiles{chain: chain}
			byChain[chain] = c
		}
		return c
	}
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() {
			continue
		}
		if m := tornRE.FindStringSubmatch(name); m != nil {
			chain, ok := sourceChain(m[1])
			if !ok {
				continue
			}
			off, err := strconv.ParseInt(m[2], 10, 64)
			if err != nil {
				continue
			}
			c := get(chain)
			c.torn = append(c.torn, tornFile{name: name, source: m[1], offset: off})
			continue
		}
		if chain, ok := sourceChain(name); ok {
			c := get(chain)
			if strings.HasSuffix(name, checkpointSuffix) {
				c.checkpoints = name
			} else {
				seq, _ := strconv.ParseInt(segmentRE.FindStringSubmatch(name)[2], 10, 64)
				c.segments = append(c.segments, segmentFile{name: name, firstSeq: seq})
			}
		}
	}
	out := make([]*chainFiles, 0, len(byChain))
	for _, c := range byChain {
		sort.Slice(c.segments, func(i, j int) bool { return c.segments[i].firstSeq < c.segments[j].firstSeq })
		sort.Slice(c.torn, func(i, j int) bool { return c.torn[i].name < c.torn[j].name })
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].chain < out[j].chain })
	return out
}

// sourceChain returns the chain a segment or checkpoints file belongs to.
func sourceChain(name string) (string, bool) {
	if chain, ok := strings.CutSuffix(name, checkpointSuffix); ok && chainRE.MatchString(chain) {
		return chain, true
	}
	if m := segmentRE.FindStringSubmatch(name); m != nil && chainRE.MatchString(m[1]) {
		return m[1], true
	}
	return "", false
}

// lineReader yields the lines of a file with their 1-based numbers and byte
// offsets. A final line without '\n' is returned with complete=false.
type lineReader struct {
	r      *bufio.Reader
	num    int
	offset int64 // offset of the line last returned
	next   int64
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 256<<10)}
}

// line returns the next line without its newline, or io.EOF.
func (lr *lineReader) line() (line []byte, complete bool, err error) {
	b, err := lr.r.ReadBytes('\n')
	if len(b) == 0 && err != nil {
		return nil, false, err
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	lr.num++
	lr.offset = lr.next
	lr.next += int64(len(b))
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1], true, nil
	}
	return b, false, nil
}

// syncDir makes a created, renamed or removed name in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func join(dir, name string) string { return filepath.Join(dir, name) }

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// FileKind is what a file in an audit directory is.
type FileKind int

// The files of a chain; FileOther is anything Verify ignores.
const (
	FileOther FileKind = iota
	FileSegment
	FileCheckpoints
	FileTorn
)

// ParseFileName says what the file called name is in an audit directory
// and which chain it belongs to, by the same rules Verify reads them with.
func ParseFileName(name string) (chain string, kind FileKind) {
	if m := tornRE.FindStringSubmatch(name); m != nil {
		if chain, ok := sourceChain(m[1]); ok {
			return chain, FileTorn
		}
		return "", FileOther
	}
	chain, ok := sourceChain(name)
	switch {
	case !ok:
		return "", FileOther
	case strings.HasSuffix(name, checkpointSuffix):
		return chain, FileCheckpoints
	}
	return chain, FileSegment
}

// CheckpointsFileName is the name of chain's checkpoints file.
func CheckpointsFileName(chain string) string { return checkpointName(chain) }
