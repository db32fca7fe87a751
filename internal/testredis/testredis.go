// Package testredis runs throwaway redis-server processes for tests: one
// node (Start), a 3-master Cluster (StartCluster) and a primary with a
// replica watched by three Sentinels (StartSentinel).
//
// Start finds redis-server on PATH, runs it on a free loopback port in a
// temporary directory without persistence, and stops it when the test ends.
// Stop and Restart let fault tests take Redis away mid-run and bring it back
// on the same address.
//
// A missing binary skips the test, loudly, unless the run requires Redis
// (GATEWAY_REQUIRE_REDIS=1, or CI set to anything but false or 0): then the
// test fails, so that a green CI run always means the tests ran.
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
	// args are added to the command line (cluster mode, replicaof, a
	// sentinel's config file).
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when cmd's process has been waited for.
	exited chan struct{}
}

// Start runs a new redis-server for tb and registers its shutdown with
// tb.Cleanup. It skips the test, loudly, when redis-server is not installed.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return startServer(tb, tb.TempDir(), nil)
}

// startServer runs redis-server in dir with args added to the defaults.
func startServer(tb testing.TB, dir string, args func(port int) []string) *Server {
	tb.Helper()
	bin := lookPath(tb, "redis-server", InstallHint)
	s := &Server{tb: tb, bin: bin, dir: dir}
	// A free port can be taken between probing and binding; try again then.
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("testredis: %v", err)
		}
		s.port = port
		if args != nil {
			s.args = args(port)
		}
		if lastErr = s.start(); lastErr == nil {
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("testredis: %v", lastErr)
	return nil
}

// lookPath finds bin on PATH, or ends the test: skipped, or failed when the
// run requires Redis (Required).
func lookPath(tb testing.TB, bin, hint string) string {
	tb.Helper()
	p, err := exec.LookPath(bin)
	if err == nil {
		return p
	}
	if why := Required(os.Getenv); why != "" {
		tb.Fatalf("%s (%s: the Redis tests must run)", hint, why)
	}
	fmt.Fprintf(os.Stderr, "SKIPPING A REDIS TEST (%s): %s\n", tb.Name(), hint)
	tb.Skip("SKIPPED: " + hint)
	return ""
}

// Required says why this run requires the Redis binaries, or "" when a
// missing one may skip: GATEWAY_REQUIRE_REDIS=1, or CI set to anything but
// false or 0.
func Required(getenv func(string) string) string {
	if getenv("GATEWAY_REQUIRE_REDIS") == "1" {
		return "GATEWAY_REQUIRE_REDIS=1"
	}
	switch v := strings.ToLower(getenv("CI")); v {
	case "", "0", "false":
		return ""
	default:
		return "CI=" + v
	}
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
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", logPath,
		"--daemonize", "no",
		"--protected-mode", "no",
	}
	if len(s.args) > 0 && !strings.HasPrefix(s.args[0], "--") {
		// A config file comes first on redis-server's command line.
		args = append([]string{s.args[0]}, append(args, s.args[1:]...)...)
	} else {
		args = append(args, s.args...)
	}
	cmd := exec.Command(s.bin, args...)
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

// Kill ends the server at once (SIGKILL), the way a crashed node goes:
// no shutdown, no last words to its replicas or Sentinels.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.exited = nil, nil
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
// replica's view of the shared state. It fails tb on a step that a Redis
// Cluster would refuse (SlotCheck).
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(s.URL())
	if err != nil {
		tb.Fatal(err)
	}
	c := redis.NewClient(opt)
	c.AddHook(SlotCheck(tb))
	tb.Cleanup(func() { _ = c.Close() })
	return c
}
