// Command ratecheck drives several gateway replicas at once, with the same
// agent token, for a fixed window and checks how many requests the shared
// rate limit admitted.
//
// Each target (-url, repeatable) gets -workers goroutines that send small
// chat requests back to back until -duration has passed since the common
// start. Every answer is counted per replica as 200 (admitted), 429
// (limited) or other. The limiter is GCRA with burst = N and N per period,
// starting full, so over a window of length T it should admit
//
//	expected = N + N/period × T
//
// where T runs from the start to the last request sent. Two figures are
// printed:
//
//	total   admitted vs expected (burst included), error in %
//	steady  the rate after the burst: requests admitted that were sent after
//	        the first 429, divided by the time from that 429 to the end,
//	        against N/period, error in %
//
// The last line is machine-readable:
//
//	RESULT admitted=A expected=E total_err_pct=X steady_rate=R steady_err_pct=Y other=O
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

type urls []string

func (u *urls) String() string     { return strings.Join(*u, ",") }
func (u *urls) Set(v string) error { *u = append(*u, v); return nil }

// sample is one answer: when its request was sent (since start) and its status.
type sample struct {
	sent   time.Duration
	status int // 0: transport error
}

func main() {
	var targets urls
	flag.Var(&targets, "url", "chat completions URL of one replica (repeat for each)")
	token := flag.String("token", "ratecheck-token", "agent bearer token")
	workers := flag.Int("workers", 8, "concurrent requests per replica")
	duration := flag.Duration("duration", 30*time.Second, "length of the window")
	n := flag.Int("limit", 3000, "rate limit N (burst = N)")
	period := flag.Duration("period", time.Minute, "rate limit period")
	flag.Parse()
	if len(targets) == 0 {
		fmt.Fprintln(os.Stderr, "ratecheck: at least one -url")
		os.Exit(2)
	}
	body := []byte(`{"model":"bench-model","messages":[{"role":"user","content":"Say hello."}]}`)
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: *workers * 2, MaxConnsPerHost: *workers * 2, DisableCompression: true},
	}

	per := load(client, targets, *workers, *duration, *token, body)

	// The window: from start to the last request sent; the first 429 (on any
	// replica) marks the end of the burst.
	var last, first429 time.Duration = 0, -1
	for _, ss := range per {
		for _, s := range ss {
			last = max(last, s.sent)
			if s.status == http.StatusTooManyRequests && (first429 < 0 || s.sent < first429) {
				first429 = s.sent
			}
		}
	}
	rate := float64(*n) / period.Seconds()
	var admitted, limited, other, steadyAdmitted int
	fmt.Printf("ratecheck: %d replicas x %d workers, window %s (last request sent at %.3fs), limit %d per %s (burst %d, %.3g/s)\n",
		len(targets), *workers, *duration, last.Seconds(), *n, *period, *n, rate)
	for ti, ss := range per {
		var ok, lim, oth int
		others := map[int]int{}
		for _, s := range ss {
			switch s.status {
			case http.StatusOK:
				ok++
				if first429 >= 0 && s.sent > first429 {
					steadyAdmitted++
				}
			case http.StatusTooManyRequests:
				lim++
			default:
				oth++
				others[s.status]++
			}
		}
		admitted += ok
		limited += lim
		other += oth
		fmt.Printf("  replica %d %s: sent %d, 200 %d, 429 %d, other %d", ti+1, targets[ti], len(ss), ok, lim, oth)
		if oth > 0 {
			fmt.Printf(" %v (status 0 = transport error)", others)
		}
		fmt.Println()
	}
	expected := float64(*n) + rate*last.Seconds()
	totalErr := 100 * (float64(admitted) - expected) / expected
	fmt.Printf("  total:  admitted %d, expected %.1f (burst %d + %.3g/s x %.3fs): error %+.3f%%\n",
		admitted, expected, *n, rate, last.Seconds(), totalErr)
	steadyRate, steadyErr := 0.0, 0.0
	if first429 >= 0 && last > first429 {
		w := (last - first429).Seconds()
		steadyRate = float64(steadyAdmitted) / w
		steadyErr = 100 * (steadyRate - rate) / rate
		fmt.Printf("  steady: burst used up at %.3fs (first 429); afterwards %d admitted in %.3fs = %.3f/s vs %.3g/s: error %+.3f%%\n",
			first429.Seconds(), steadyAdmitted, w, steadyRate, rate, steadyErr)
	} else {
		fmt.Println("  steady: no 429 seen, the load never exhausted the burst (more workers or a longer window)")
	}
	fmt.Printf("RESULT admitted=%d expected=%.1f total_err_pct=%.4f steady_rate=%.4f steady_err_pct=%.4f limited=%d other=%d first429_s=%.3f\n",
		admitted, expected, totalErr, steadyRate, steadyErr, limited, other, max(0, first429.Seconds()))
}

// load sends body to every replica from workers goroutines each, until
// duration has passed, and returns what each replica answered when.
func load(client *http.Client, targets urls, workers int, duration time.Duration, token string, body []byte) [][]sample {
	per := make([][]sample, len(targets))
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(duration))
	defer cancel()
	for ti, u := range targets {
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(ti int, u string) {
				defer wg.Done()
				var mine []sample
				for {
					sent := time.Since(start)
					if sent >= duration {
						break
					}
					req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+token)
					st := 0
					resp, err := client.Do(req)
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						st = resp.StatusCode
					}
					mine = append(mine, sample{sent: sent, status: st})
					if ctx.Err() != nil {
						break
					}
				}
				mu.Lock()
				per[ti] = append(per[ti], mine...)
				mu.Unlock()
			}(ti, u)
		}
	}
	wg.Wait()
	return per
}
