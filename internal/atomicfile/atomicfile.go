// Package atomicfile replaces a small state file so that a crash leaves
// either the old or the new content, never half of one: the stores that
// keep run-time state in state.dir (spawned agents, the admin API's agents,
// keys and teams) write through it.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces dir/name with raw: a temporary file in the same
// directory, mode 0600 (the files hold token hashes), synced, renamed over
// the file, and the directory synced so that the rename itself survives a
// crash. renamed reports whether the file holds raw, even when syncing the
// directory then failed: the caller's memory must follow what a restart
// would read.
func Write(dir, name string, raw []byte) (renamed bool, err error) {
	path := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if !renamed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes it 0600 already; said again because the file holds
	// token hashes, whatever the umask.
	if err := tmp.Chmod(0o600); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(raw); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return false, fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("replace %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return true, fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return true, fmt.Errorf("sync %s: %w", dir, err)
	}
	return true, nil
}
