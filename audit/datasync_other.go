//go:build !linux

package audit

// datasync is fsync where fdatasync is not at hand.
func datasync(f segmentWriter) error { return f.Sync() }
