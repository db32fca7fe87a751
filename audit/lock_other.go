//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package audit

import (
	"fmt"
	"os"
)

// lockChain only creates the lock file where flock is unavailable; the
// gateway's supported platforms are the ones in lock_unix.go.
func lockChain(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	return f, nil
}

func unlockChain(f *os.File) { _ = f.Close() }
