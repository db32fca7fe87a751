//go:build linux

package audit

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncLayout is one way of making an appended record durable.
type syncLayout struct {
	name    string
	appends bool // the file is opened O_APPEND
	// open prepares the file; write appends data at off and makes it
	// durable.
	open  func(f *os.File) error
	write func(f *os.File, data []byte, off int64) error
}

const syncChunk = 1 << 20 // what the preallocating layouts reserve at a time

func syncLayouts() []syncLayout {
	nop := func(*os.File) error { return nil }
	fsyncAppend := func(f *os.File, data []byte, _ int64) error {
		if _, err := f.Write(data); err != nil {
			return err
		}
		return f.Sync()
	}
	datasyncAppend := func(f *os.File, data []byte, _ int64) error {
		if _, err := f.Write(data); err != nil {
			return err
		}
		return datasync(f)
	}
	// reserve calls grow whenever the write would pass the reserved end.
	var reserved int64
	reserve := func(grow func(f *os.File, from int64) error) func(f *os.File, data []byte, off int64) error {
		return func(f *os.File, data []byte, off int64) error {
			if end := off + int64(len(data)); end > reserved {
				if err := grow(f, reserved); err != nil {
					return err
				}
				reserved += syncChunk
			}
			if _, err := f.WriteAt(data, off); err != nil {
				return err
			}
			return datasync(f)
		}
	}
	fallocate := func(mode uint32) func(f *os.File, from int64) error {
		return func(f *os.File, from int64) error {
			return syscall.Fallocate(int(f.Fd()), mode, from, syncChunk)
		}
	}
	zeros := make([]byte, syncChunk)
	zeroFill := func(f *os.File, from int64) error {
		if _, err := f.WriteAt(zeros, from); err != nil {
			return err
		}
		return datasync(f)
	}
	resetReserved := func(*os.File) error { reserved = 0; return nil }
	keepSize := func(f *os.File, data []byte, off int64) error {
		if end := off + int64(len(data)); end > reserved {
			if err := syscall.Fallocate(int(f.Fd()), 1 /* FALLOC_FL_KEEP_SIZE */, reserved, syncChunk); err != nil {
				return err
			}
			reserved += syncChunk
		}
		return datasyncAppend(f, data, off)
	}
	return []syncLayout{
		{"append-fsync", true, nop, fsyncAppend},
		{"append-fdatasync", true, nop, datasyncAppend},
		{"fallocate-keepsize-append-fdatasync", true, resetReserved, keepSize},
		{"fallocate-overwrite-fdatasync", false, resetReserved, reserve(fallocate(0))},
		{"zerofill-overwrite-fdatasync", false, resetReserved, reserve(zeroFill)},
	}
}

// BenchmarkSyncLayout measures the CPU (getrusage: user and system time
// of this process; the file system's journal thread is not counted) and
// the wall time of one durable write in each file layout, for a lone
// client's entry (600 B) and for a group commit of about fifty (32 KB).
// Run it alone: go test ./audit -run '^$' -bench SyncLayout -benchtime 2000x
func BenchmarkSyncLayout(b *testing.B) {
	for _, size := range []int{600, 32 << 10} {
		for _, lay := range syncLayouts() {
			b.Run(lay.name+"/"+byteSize(size), func(b *testing.B) {
				flag := os.O_RDWR | os.O_CREATE
				if lay.appends {
					flag |= os.O_APPEND
				}
				f, err := os.OpenFile(filepath.Join(b.TempDir(), "seg"), flag, 0o640)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				if err := lay.open(f); err != nil {
					b.Fatal(err)
				}
				data := make([]byte, size)
				for i := range data {
					data[i] = 'a' + byte(i%26)
				}
				data[size-1] = '\n'
				var off int64
				cpu0, t0 := processCPU(), time.Now()
				b.ResetTimer()
				for range b.N {
					if err := lay.write(f, data, off); err != nil {
						b.Fatal(err)
					}
					off += int64(size)
				}
				b.StopTimer()
				b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/sync")
				b.ReportMetric(float64(time.Since(t0).Microseconds())/float64(b.N), "wall-µs/sync")
			})
		}
	}
}

func byteSize(n int) string {
	if n >= 1<<10 {
		return strconv.Itoa(n>>10) + "KB"
	}
	return strconv.Itoa(n) + "B"
}

// BenchmarkAppendDurableCPU is the process CPU per durable entry through
// the Log on the test's file system (not tmpfs: the sync is the point),
// for a lone client and for 16 and 128 concurrent ones, each beginning an
// exchange, appending and waiting as the doors do. With one client every
// entry pays a sync; with many, the group commit shares it.
// Run it alone: go test ./audit -run '^$' -bench AppendDurableCPU -benchtime 2000x
func BenchmarkAppendDurableCPU(b *testing.B) {
	r := Record{Kind: KindLLMResponse, AgentID: "claude-3", SessionID: "sess-1", RequestID: "req-0123456789",
		Object: Members("model", "gpt-4o-mini", "tokens", map[string]any{"prompt": 120, "completion": 300, "total": 420},
			"latency_ms", 812, "status", 200, "checks", map[string]any{"auth": "pass", "policy": map[string]any{"decision_id": "d-1", "allow": true}})}
	for _, clients := range []int{1, 16, 128} {
		b.Run("clients="+strconv.Itoa(clients), func(b *testing.B) {
			l := openLog(b, Config{Dir: b.TempDir(), CheckpointEvery: -1})
			start := l.Stats()
			cpu0, t0 := processCPU(), time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := c; i < b.N; i += clients {
						end := l.Begin()
						_, err := l.Append(context.Background(), r)
						end()
						if err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			cpu, wall := processCPU()-cpu0, time.Since(t0)
			st := l.Stats()
			n := float64(st.Entries - start.Entries)
			syncs := float64(st.Fsyncs - start.Fsyncs)
			b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/entry")
			b.ReportMetric(n/syncs, "entries/sync")
			b.ReportMetric(float64((st.FsyncTime-start.FsyncTime).Microseconds())/syncs, "sync-µs")
			b.ReportMetric(n/wall.Seconds(), "entries/s")
		})
	}
}
