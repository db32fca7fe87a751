package admin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// readFile reads the memory backend's file in dir (created 0700 if
// missing); nil when there is none yet.
func readFile(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	return raw, nil
}
