package mcp

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// procAttr puts a stdio server in a process group of its own, killed with
// the gateway's thread that started it (the gateway's end).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// limitMemory bounds the process's address space (RLIMIT_AS); what it
// starts inherits the bound.
func limitMemory(pid int, max uint64) error {
	if max == 0 {
		return nil
	}
	return unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: max, Max: max}, nil)
}

// killGroup kills the process and what it started.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
