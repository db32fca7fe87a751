// Package testredis runs a throwaway redis-server for tests.
//
// Start finds redis-server on PATH, runs it on a free loopback port in a
// temporary directory without persistence, and stops it when the test ends.
// Stop and Restart let fault tests take Redis away mid-run and bring it back
// on the same address.
package testredis

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// InstallHint is the reason given when redis-server is missing.
const InstallHint = "redis-server not installed: apt-get install -y redis-server"

// startTimeout bounds how long a started server may take to answer PING.
const startTimeout = 10 * time.Second

// Server is a redis-server process owned by one test.
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when cmd's process has been waited for.
	exited chan struct{}
}

// Start runs a new redis-server for tb and registers its shutdown with
// tb.Cleanup. It skips the test, loudly, when redis-server is not installed.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Skip("SKIPPED: " + InstallHint)
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir()}
	// A free port can be taken between probing and binding; try again then.
	var lastErr error
	for range 5 {
		s.port, err = freePort()
		if err != nil {
			tb.Fatalf("testredis: %v", err)
		}
		if lastErr = s.start(); lastErr == nil {
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("testredis: %v", lastErr)
	return nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's address as a redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Stop terminates the server and waits for it to exit. Stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

// Restart stops the server if it runs and starts a new one on the same port
// (with empty data: nothing is persisted).
func (s *Server) Restart() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	var err error
	// The port was just released; binding it again can briefly fail.
	for range 20 {
		if err = s.startLocked(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.tb.Fatalf("testredis: restart on port %d: %v", s.port, err)
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLocked()
}

func (s *Server) startLocked() error {
	logPath := filepath.Join(s.dir, "redis.log")
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", logPath,
		"--daemonize", "no",
		"--protected-mode", "no",
	)
	cmd.Dir = s.dir
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	deadline := time.Now().Add(startTimeout)
	for {
		err := ping(s.Addr())
		if err == nil {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on port %d exited: %s", s.port, logTail(logPath))
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server on port %d did not answer PING within %s: %v: %s", s.port, startTimeout, err, logTail(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pause freezes the server (SIGSTOP): connections stay open and nothing
// answers, the way a hung Redis behaves (unlike a stopped one, which
// refuses connections at once).
func (s *Server) Pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Resume lets a paused server answer again (SIGCONT).
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

func (s *Server) stopLocked() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused server ignores SIGTERM
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd, s.exited = nil, nil
}

// ping sends a RESP PING and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return errors.New("unexpected PING reply " + strconv.Quote(line))
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// Client is a new connection to the server, closed when tb ends: one
// replica's view of the shared state.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(s.URL())
	if err != nil {
		tb.Fatal(err)
	}
	c := redis.NewClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}
