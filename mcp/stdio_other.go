//go:build !linux

package mcp

import (
	"errors"
	"os/exec"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return nil }

// limitMemory: the gateway bounds a stdio server's memory on Linux only,
// and runs none it cannot bound.
func limitMemory(int, uint64) error {
	return errors.New("bounding a process's memory needs Linux")
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
