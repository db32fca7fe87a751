// Command sseload opens many concurrent SSE chat completions against one
// target and checks that every stream ends with "data: [DONE]".
//
// Each stream is a POST of a small chat request with "stream":true and the
// model "bench-slow", which the benchmark's mock upstream paces (one event
// every -slow-interval), so that the streams are open at the same time.
// Starts are spread over -ramp so that the listen backlogs are not
// overwhelmed; a failed dial is retried with backoff and counted apart.
//
// Outcomes, each stream exactly one:
//
//	done    status 200 and the body ends with "data: [DONE]"
//	cut     status 200 but the body ended (or broke) before "data: [DONE]"
//	errors  no 200 answer: a non-200 status, or a dial/request failure
//	        that persisted through the retries
//
// It prints "streams=N done=M cut=K errors=E ..." and exits 1 if any stream
// was cut, 2 if none was cut but some failed, 0 otherwise.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type result struct {
	done, cut, failed     atomic.Int64
	dialRetries           atomic.Int64
	active, peak          atomic.Int64
	minEvents, maxEvents  atomic.Int64
	mu                    sync.Mutex
	reasons               map[string]int
	firstByte, totalTimes []time.Duration
}

func (r *result) reason(kind, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(detail) > 120 {
		detail = detail[:120]
	}
	r.reasons[kind+": "+detail]++
}

func (r *result) times(first, total time.Duration) {
	r.mu.Lock()
	r.firstByte = append(r.firstByte, first)
	r.totalTimes = append(r.totalTimes, total)
	r.mu.Unlock()
}

func main() {
	target := flag.String("url", "http://127.0.0.1:18083/v1/chat/completions", "chat completions URL of the target")
	token := flag.String("token", "bench-token", "bearer token (empty: no Authorization header)")
	n := flag.Int("n", 10000, "number of concurrent streams")
	ramp := flag.Duration("ramp", 4*time.Second, "spread the stream starts over this long")
	model := flag.String("model", "bench-slow", "model to ask for (the mock upstream paces \"bench-slow\")")
	timeout := flag.Duration("timeout", 120*time.Second, "bound on one stream, from its start")
	retries := flag.Int("dial-retries", 10, "retries of a failed dial (connection refused/reset before any answer)")
	flag.Parse()

	body := []byte(`{"model":"` + *model + `","stream":true,"messages":[{"role":"user","content":"Say hello."}]}`)
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxConnsPerHost:     0,
		MaxIdleConns:        *n,
		MaxIdleConnsPerHost: *n,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	client := &http.Client{Transport: tr}
	res := &result{reasons: map[string]int{}}
	res.minEvents.Store(1 << 30)

	start := time.Now()
	var wg sync.WaitGroup
	// Launch in 5 ms batches along the ramp.
	const tick = 5 * time.Millisecond
	launched := 0
	for launched < *n {
		due := *n
		if *ramp > 0 {
			el := time.Since(start)
			due = int(int64(*n) * int64(el+tick) / int64(*ramp))
			if due > *n {
				due = *n
			}
		}
		for ; launched < due; launched++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stream(client, *target, *token, body, *timeout, *retries, res)
			}()
		}
		if launched < *n {
			time.Sleep(tick)
		}
	}
	rampDone := time.Since(start)
	wg.Wait()
	elapsed := time.Since(start)
	tr.CloseIdleConnections()

	done, cut, failed := res.done.Load(), res.cut.Load(), res.failed.Load()
	minEv := res.minEvents.Load()
	if minEv == 1<<30 {
		minEv = 0
	}
	fmt.Printf("streams=%d done=%d cut=%d errors=%d dial_retries=%d peak_concurrent=%d events_per_stream=%d..%d ramp=%s elapsed=%s",
		*n, done, cut, failed, res.dialRetries.Load(), res.peak.Load(), minEv, res.maxEvents.Load(),
		rampDone.Round(time.Millisecond), elapsed.Round(time.Millisecond))
	if len(res.firstByte) > 0 {
		fmt.Printf(" first_byte_p50=%s first_byte_p99=%s", pct(res.firstByte, 50), pct(res.firstByte, 99))
	}
	fmt.Println()
	if len(res.reasons) > 0 {
		type kv struct {
			k string
			v int
		}
		var list []kv
		for k, v := range res.reasons {
			list = append(list, kv{k, v})
		}
		sort.Slice(list, func(i, j int) bool { return list[i].v > list[j].v })
		for i, e := range list {
			if i == 10 {
				fmt.Printf("  ... %d more kinds\n", len(list)-10)
				break
			}
			fmt.Printf("  %6d x %s\n", e.v, e.k)
		}
	}
	switch {
	case cut > 0:
		os.Exit(1)
	case failed > 0:
		os.Exit(2)
	}
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i].Round(time.Millisecond)
}

// retryable reports a failure to connect, before anything was sent or
// answered: refused, reset during the handshake, or out of local ports.
func retryable(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EADDRNOTAVAIL)
}

var doneMark = []byte("data: [DONE]")

func stream(client *http.Client, url, token string, body []byte, timeout time.Duration, retries int, res *result) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	t0 := time.Now()
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header["Content-Type"] = []string{"application/json"}
		req.Header["Accept"] = []string{"text/event-stream"}
		if token != "" {
			req.Header["Authorization"] = []string{"Bearer " + token}
		}
		var err error
		resp, err = client.Do(req)
		if err == nil {
			break
		}
		if attempt < retries && retryable(err) && ctx.Err() == nil {
			res.dialRetries.Add(1)
			time.Sleep(time.Duration(50*(attempt+1)) * time.Millisecond)
			continue
		}
		res.failed.Add(1)
		res.reason("error", err.Error())
		return
	}
	defer resp.Body.Close()
	first := time.Since(t0)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		res.failed.Add(1)
		res.reason(fmt.Sprintf("status %d", resp.StatusCode), strings.TrimSpace(string(b)))
		return
	}
	a := res.active.Add(1)
	for {
		p := res.peak.Load()
		if a <= p || res.peak.CompareAndSwap(p, a) {
			break
		}
	}
	data, err := io.ReadAll(resp.Body)
	res.active.Add(-1)
	events := int64(bytes.Count(data, []byte("data:")))
	for {
		m := res.minEvents.Load()
		if events >= m || res.minEvents.CompareAndSwap(m, events) {
			break
		}
	}
	for {
		m := res.maxEvents.Load()
		if events <= m || res.maxEvents.CompareAndSwap(m, events) {
			break
		}
	}
	ended := bytes.HasSuffix(bytes.TrimRight(data, "\r\n"), doneMark)
	switch {
	case err != nil:
		res.cut.Add(1)
		res.reason("cut", fmt.Sprintf("after %d events: %v", events, err))
	case !ended:
		res.cut.Add(1)
		res.reason("cut", fmt.Sprintf("clean EOF after %d events without [DONE]", events))
	default:
		res.done.Add(1)
		res.times(first, time.Since(t0))
	}
}
