package ship

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sacpgw/gateway/audit"
)

// cursorFile, in the audit directory, records what was shipped where, so
// a restart neither re-reads every file nor uploads one twice. It is only
// a cache: a file it does not list is compared with the bucket's object
// before any upload, and checkpoint pieces are listed from the bucket.
const cursorFile = "ship-cursor.json"

type cursor struct {
	path string
	URL  string `json:"url"`
	// Files are the segments and torn files shipped, by name.
	Files map[string]shipped `json:"files"`
	// Checkpoints is, by chain, how many bytes of its checkpoints file are
	// shipped.
	Checkpoints map[string]int64 `json:"checkpoints"`
}

type shipped struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// loadCursor reads dir's cursor; one for another URL, or none, starts
// empty.
func loadCursor(dir, url string) (*cursor, error) {
	c := &cursor{path: filepath.Join(dir, cursorFile)}
	data, err := os.ReadFile(c.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", c.path, err)
	default:
		if err := json.Unmarshal(data, c); err != nil || c.URL != url {
			// Unreadable (a foreign file) or for another bucket: the
			// bucket is compared instead, which costs time, not data.
			c = &cursor{path: c.path}
		}
	}
	c.URL = url
	if c.Files == nil {
		c.Files = map[string]shipped{}
	}
	if c.Checkpoints == nil {
		c.Checkpoints = map[string]int64{}
	}
	return c, nil
}

// save replaces the cursor file atomically: a crash leaves the old one or
// the new one, never a torn one.
func (c *cursor) save() error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := audit.ReplaceFile(c.path, data); err != nil {
		return fmt.Errorf("save ship cursor: %w", err)
	}
	return nil
}
