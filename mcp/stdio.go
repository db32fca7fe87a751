package mcp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sacpgw/gateway/internal/config"
)

// A stdio server is a program the gateway runs and speaks MCP to over its
// standard input and output. A stdio connection is one client's session,
// so the gateway runs one process per session (its own catalog reads
// included) and reaches them through an http.RoundTripper that answers
// the door's Streamable HTTP requests: everything the door does for an
// HTTP server (sessions, governance, redaction, audit, health) it does
// for a stdio server unchanged.
//
// Bounds: a process's address space (RLIMIT_AS, set as it starts), every
// call (the server's timeout, as for HTTP), a process unused for
// sessionIdle ends, and at most maxStdioProcs run per server (a new one
// ends the least recently used). A process that exits on its own makes
// the next start of that server wait (back-off), so a program that dies at
// once is not restarted in a loop by agents initializing again.
const (
	maxStdioProcs = 128
	// stdioStable is how long a process must live for its exit not to
	// count towards the back-off.
	stdioStable = time.Minute
	maxBackoff  = 30 * time.Second
	// maxStderrLine bounds a line of a server's stderr in the log.
	maxStderrLine = 2048
)

// errBackingOff: the server's program died recently and may not start yet.
var errBackingOff = errors.New("the stdio server exited recently; restarting it after a back-off")

// stdioServer runs one configured stdio server's processes.
type stdioServer struct {
	name      string
	argv, env []string
	dir       string
	maxMemory uint64
	log       *slog.Logger
	client    *http.Client

	mu     sync.Mutex
	procs  map[string]*stdioProc
	closed bool
	// failures counts the exits in a row of processes that did not live
	// stdioStable; notBefore is when the next may start.
	failures  int
	notBefore time.Time
}

func newStdioServer(sc config.MCPServer, log *slog.Logger) *stdioServer {
	env := []string{"PATH=" + os.Getenv("PATH")}
	if home := os.Getenv("HOME"); home != "" {
		env = append(env, "HOME="+home)
	}
	for _, k := range slices.Sorted(maps.Keys(sc.Env)) {
		env = append(env, k+"="+sc.Env[k])
	}
	s := &stdioServer{name: sc.Name, argv: sc.Command, env: env, dir: sc.Dir, maxMemory: uint64(sc.MaxMemory), log: log,
		procs: map[string]*stdioProc{}}
	s.client = &http.Client{Transport: s}
	return s
}

// stdioKey is what a stdio server's processes depend on: a reload that
// changes none of it keeps them (and the sessions on them).
func stdioKey(sc config.MCPServer) string {
	h := sha256.New()
	for _, a := range sc.Command {
		h.Write([]byte(strconv.Quote(a)))
	}
	for _, k := range slices.Sorted(maps.Keys(sc.Env)) {
		h.Write([]byte(strconv.Quote(k) + strconv.Quote(sc.Env[k])))
	}
	h.Write([]byte(strconv.Quote(sc.Dir) + strconv.Itoa(int(sc.MaxMemory))))
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// stdioURL stands for the server where the door wants a URL: its
// sessions' target, so that a changed command ends them.
func stdioURL(name, key string) string { return "stdio://" + name + "/" + key }

// close ends every process; the server starts none after.
func (s *stdioServer) close() {
	s.mu.Lock()
	s.closed = true
	procs := s.procs
	s.procs = map[string]*stdioProc{}
	s.mu.Unlock()
	for _, p := range procs {
		p.stop()
	}
}

// RoundTrip answers the door's request as a Streamable HTTP server would:
// POST writes the messages to the session's process (an initialize
// without a session starts one) and streams back what it answers, GET
// streams what it sends unasked, DELETE ends it.
func (s *stdioServer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	sid := req.Header.Get(hdrSession)
	if req.Method == http.MethodPost && sid == "" {
		return s.initialize(req)
	}
	p := s.get(sid)
	if p == nil {
		return reply(req, http.StatusNotFound, nil), nil
	}
	switch req.Method {
	case http.MethodPost:
		return p.post(req, false)
	case http.MethodGet:
		return p.listen(req), nil
	case http.MethodDelete:
		s.drop(p)
		p.stop()
		return reply(req, http.StatusOK, nil), nil
	}
	return reply(req, http.StatusMethodNotAllowed, nil), nil
}

// initialize starts a process for a new session and passes it the
// initialize request.
func (s *stdioServer) initialize(req *http.Request) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	if m, err := readMessage(body); err != nil || m.method != "initialize" || !m.isRequest() {
		return reply(req, http.StatusBadRequest, nil), nil
	}
	p, err := s.start(req.Context())
	if err != nil {
		return nil, err
	}
	resp, err := p.post(req, true)
	if err != nil {
		s.drop(p)
		p.stop()
		return nil, err
	}
	return resp, nil
}

func (s *stdioServer) get(id string) *stdioProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.procs[id]
	if p != nil {
		p.used = time.Now()
	}
	return p
}

func (s *stdioServer) drop(p *stdioProc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs[p.id] == p {
		delete(s.procs, p.id)
	}
}

// start runs a new process, once the back-off allows, within ctx.
func (s *stdioServer) start(ctx context.Context) (*stdioProc, error) {
	s.mu.Lock()
	wait, closed := time.Until(s.notBefore), s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("the stdio server is no longer configured")
	}
	if wait > 0 {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, errBackingOff
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, errBackingOff
		}
	}
	p, err := s.spawn()
	if err != nil {
		s.log.Error("mcp: stdio server did not start", "server", s.name, "error", err.Error())
		s.exited(0)
		return nil, fmt.Errorf("the stdio server did not start: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		go p.stop()
		return nil, errors.New("the stdio server is no longer configured")
	}
	s.reap()
	s.procs[p.id] = p
	return p, nil
}

// reap ends the processes unused for sessionIdle, and the least recently
// used beyond maxStdioProcs - 1. s.mu is held.
func (s *stdioServer) reap() {
	var lru *stdioProc
	for id, p := range s.procs {
		if time.Since(p.used) > sessionIdle {
			delete(s.procs, id)
			go p.stop()
			continue
		}
		if lru == nil || p.used.Before(lru.used) {
			lru = p
		}
	}
	if len(s.procs) >= maxStdioProcs && lru != nil {
		delete(s.procs, lru.id)
		go lru.stop()
	}
}

// exited notes that a process ended on its own after living lived, and
// sets when the next may start.
func (s *stdioServer) exited(lived time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lived >= stdioStable {
		s.failures = 0
	}
	s.failures++
	d := backoff(s.failures)
	s.notBefore = time.Now().Add(d)
	return d
}

// backoff is the wait before the next start after n early exits in a row:
// none after the first (a crash mid-session is answered by a fresh
// process at once), then 1s, 2s, 4s, ... up to maxBackoff.
func backoff(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d := time.Second << min(n-2, 10)
	return min(d, maxBackoff)
}

// spawn starts the program: its own process group (so that what it starts
// ends with it), killed if the gateway dies, its memory bounded.
func (s *stdioServer) spawn() (*stdioProc, error) {
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Env, cmd.Dir = s.env, s.dir
	cmd.SysProcAttr = procAttr()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = inR
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	inR.Close()
	if err := limitMemory(cmd.Process.Pid, s.maxMemory); err != nil {
		killGroup(cmd)
		_ = cmd.Wait()
		inW.Close()
		return nil, fmt.Errorf("bounding its memory: %w", err)
	}
	p := &stdioProc{id: newSessionID(), srv: s, cmd: cmd, stdin: inW, started: time.Now(), used: time.Now(),
		calls: map[*stdioCall]bool{}, done: make(chan struct{})}
	go p.logStderr(stderr)
	go p.read(stdout)
	return p, nil
}

// stdioProc is one running process: one session.
type stdioProc struct {
	id      string
	srv     *stdioServer
	cmd     *exec.Cmd
	stdin   *os.File
	started time.Time
	used    time.Time // under srv.mu

	wmu sync.Mutex // one message written at a time

	mu       sync.Mutex
	calls    map[*stdioCall]bool
	order    []*stdioCall // the calls waiting, oldest first
	listener chan []byte
	stopping bool
	done     chan struct{} // closed when stdout ends
}

// stdioCall is one POST waiting for the answers to its requests.
type stdioCall struct {
	ids  map[string]bool // of the requests not yet answered
	out  chan []byte     // the messages for it; closed by the reader
	gone chan struct{}   // closed when the door stops reading
	died bool            // the process ended before every answer
}

// post writes the request's messages, one per line, and answers 202 when
// none is a request, else an event stream of the process's messages until
// every request is answered.
func (p *stdioProc) post(req *http.Request, opened bool) (*http.Response, error) {
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	msgs, _, err := readMessages(body)
	if err != nil {
		return reply(req, http.StatusBadRequest, nil), nil
	}
	c := &stdioCall{ids: map[string]bool{}, out: make(chan []byte, 16), gone: make(chan struct{})}
	for _, m := range msgs {
		if m.isRequest() {
			c.ids[string(compact(m.id))] = true
		}
	}
	// Answers may come (and empty c.ids) as soon as the messages are
	// written: whether any is awaited is decided before.
	asks := len(c.ids) > 0
	if asks && !p.expect(c) {
		return reply(req, http.StatusNotFound, nil), nil
	}
	for _, m := range msgs {
		if err := p.write(req.Context(), compact(m.raw)); err != nil {
			p.forget(c)
			return nil, fmt.Errorf("writing to the stdio server: %w", err)
		}
	}
	if !asks {
		return reply(req, http.StatusAccepted, nil), nil
	}
	resp := reply(req, http.StatusOK, nil)
	resp.Header.Set("Content-Type", "text/event-stream")
	if opened {
		resp.Header.Set(hdrSession, p.id)
	}
	pr, pw := io.Pipe()
	resp.Body = pr
	go c.stream(req.Context(), pw, func() { p.forget(c) })
	return resp, nil
}

// stream writes the call's messages as events until the last answer, the
// process's end (an error: the answers will not come) or ctx's.
func (c *stdioCall) stream(ctx context.Context, pw *io.PipeWriter, forget func()) {
	defer close(c.gone)
	for {
		select {
		case msg, ok := <-c.out:
			if !ok {
				if c.died {
					pw.CloseWithError(errors.New("the stdio server exited"))
				} else {
					pw.Close()
				}
				return
			}
			if _, err := pw.Write(append(append([]byte("data: "), msg...), "\n\n"...)); err != nil {
				forget()
				return
			}
		case <-ctx.Done():
			forget()
			pw.CloseWithError(ctx.Err())
			return
		}
	}
}

// expect registers c for its answers; false when the process ended.
func (p *stdioProc) expect(c *stdioCall) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping || isClosed(p.done) {
		return false
	}
	p.calls[c] = true
	p.order = append(p.order, c)
	return true
}

// forget drops a call whose reader left.
func (p *stdioProc) forget(c *stdioCall) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unlist(c)
}

// unlist removes c from the waiting calls. p.mu is held.
func (p *stdioProc) unlist(c *stdioCall) {
	delete(p.calls, c)
	if i := slices.Index(p.order, c); i >= 0 {
		p.order = slices.Delete(p.order, i, i+1)
	}
}

// write writes one message and its newline, within ctx's deadline: a
// process that does not read cannot hold the door.
func (p *stdioProc) write(ctx context.Context, msg []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(30 * time.Second)
	}
	if err := p.stdin.SetWriteDeadline(dl); err != nil {
		return err
	}
	_, err := p.stdin.Write(append(slices.Clip(msg), '\n'))
	return err
}

// read reads the process's stdout, one message per line, and hands each
// to whoever waits for it: an answer to its call, anything else to the
// oldest call waiting (as an HTTP server streams what it sends while
// answering), else to the session's listener, else nowhere. A line that
// is not a JSON-RPC message is not passed on.
func (p *stdioProc) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), maxMessage)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		m, err := readMessage(line)
		if err != nil {
			p.srv.log.Warn("mcp: stdio server wrote a line that is not JSON-RPC", "server", p.srv.name, "error", err.Error())
			continue
		}
		p.deliver(m, bytes.Clone(line))
	}
	if err := sc.Err(); err != nil {
		p.srv.log.Warn("mcp: stdio server output not read", "server", p.srv.name, "error", err.Error())
	}
	p.ended()
}

// deliver routes one message (see read).
func (p *stdioProc) deliver(m *message, line []byte) {
	p.mu.Lock()
	var to *stdioCall
	last := false
	if m.isResponse() {
		id := string(compact(m.id))
		for c := range p.calls {
			if c.ids[id] {
				to = c
				delete(c.ids, id)
				last = len(c.ids) == 0
				break
			}
		}
		if last {
			p.unlist(to)
		}
	} else if len(p.order) > 0 {
		to = p.order[0]
	}
	listener := p.listener
	p.mu.Unlock()
	switch {
	case to != nil:
		select {
		case to.out <- line:
		case <-to.gone:
		}
		if last {
			close(to.out)
		}
	case listener != nil && !m.isResponse():
		select {
		case listener <- line:
		default: // a listener that does not keep up loses messages, as one not listening does
		}
	}
}

// ended runs when stdout ends: the calls waiting end with an error, the
// listener's stream ends, and an exit the gateway did not ask for counts
// towards the back-off.
func (p *stdioProc) ended() {
	p.mu.Lock()
	close(p.done)
	calls := p.order
	p.order, p.calls = nil, map[*stdioCall]bool{}
	if p.listener != nil {
		close(p.listener)
		p.listener = nil
	}
	stopping := p.stopping
	p.mu.Unlock()
	for _, c := range calls {
		c.died = true
		close(c.out)
	}
	killGroup(p.cmd)
	err := p.cmd.Wait()
	p.stdin.Close()
	p.srv.drop(p)
	if stopping {
		return
	}
	status := "exited"
	if err != nil {
		status = err.Error()
	}
	wait := p.srv.exited(time.Since(p.started))
	p.srv.log.Warn("mcp: stdio server ended", "server", p.srv.name, "status", status, "restart_after", wait.String())
}

// listen answers a GET: what the process sends outside any call, until
// it ends or the door stops listening. A newer GET replaces an older one.
func (p *stdioProc) listen(req *http.Request) *http.Response {
	ch := make(chan []byte, 64)
	p.mu.Lock()
	if isClosed(p.done) {
		p.mu.Unlock()
		return reply(req, http.StatusNotFound, nil)
	}
	if p.listener != nil {
		close(p.listener)
	}
	p.listener = ch
	p.mu.Unlock()
	resp := reply(req, http.StatusOK, nil)
	resp.Header.Set("Content-Type", "text/event-stream")
	pr, pw := io.Pipe()
	resp.Body = pr
	go func() {
		defer pw.Close()
		for {
			select {
			case msg, ok := <-ch:
				if !ok {
					return
				}
				if _, err := pw.Write(append(append([]byte("data: "), msg...), "\n\n"...)); err != nil {
					p.unlisten(ch)
					return
				}
			case <-req.Context().Done():
				p.unlisten(ch)
				return
			}
		}
	}()
	return resp
}

func (p *stdioProc) unlisten(ch chan []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener == ch {
		close(ch)
		p.listener = nil
	}
}

// stop ends the process as the gateway asked (not a failure).
func (p *stdioProc) stop() {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	killGroup(p.cmd)
}

// logStderr puts the process's stderr in the log, line by line, bounded.
func (p *stdioProc) logStderr(stderr io.Reader) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		if len(line) > maxStderrLine {
			line = line[:maxStderrLine] + "..."
		}
		p.srv.log.Info("mcp: stdio server stderr", "server", p.srv.name, "line", strings.ToValidUTF8(line, "?"))
	}
	_, _ = io.Copy(io.Discard, stderr) // a line too long: keep the pipe drained
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// readBody reads a request body the door wrote (bounded all the same).
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, maxMessage+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxMessage {
		return nil, fmt.Errorf("a message larger than %d bytes", maxMessage)
	}
	return b, nil
}

// reply is a response of status with body.
func reply(req *http.Request, status int, body []byte) *http.Response {
	return &http.Response{StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status), Proto: "HTTP/1.1",
		ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		Request: req}
}
