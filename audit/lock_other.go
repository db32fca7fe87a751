//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package audit

import "os"

// lockChain only creates the lock file where flock is unavailable; the
// gateway's supported platforms are the ones in lock_unix.go.
func lockChain(path string) (*os.File, error) { return openLockFile(path) }

func unlockChain(f *os.File) { _ = f.Close() }
