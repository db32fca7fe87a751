//go:build linux

package audit

import (
	"os"
	"syscall"
)

// datasync makes a segment's appended lines durable with fdatasync(2), as
// write-ahead logs that must be cheap per record do (etcd's WAL): it
// flushes the data and the metadata needed to read it back, the file's new
// size included, and skips the rest (the modification time), which fsync
// would journal as well. Every entry is an append, so a line fdatasync
// returned for survives a crash exactly as with fsync.
func datasync(f segmentWriter) error {
	of, ok := f.(*os.File)
	if !ok {
		return f.Sync()
	}
	rc, err := of.SyscallConn()
	if err != nil {
		return f.Sync()
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fdatasync(int(fd)); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: of.Name(), Err: serr}
	}
	return nil
}
