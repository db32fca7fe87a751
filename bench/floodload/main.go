// Command floodload sends chat requests with a wrong token as fast as it
// can, from a chosen local address (so the flood is its own source), and
// prints how many were answered with each status. bench/flood.sh uses it.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "", "chat completions URL of the gateway (loopback only)")
	from := flag.String("from", "127.0.0.2", "local address the connections come from")
	conns := flag.Int("c", 64, "concurrent connections")
	d := flag.Duration("d", 10*time.Second, "duration")
	flag.Parse()
	if !strings.HasPrefix(*url, "http://127.") {
		fmt.Fprintln(os.Stderr, "floodload: -url must be a loopback http URL")
		os.Exit(2)
	}
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(*from)}, Timeout: 5 * time.Second}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: *conns}}
	body := `{"model":"bench-model","messages":[{"role":"user","content":"Say hello."}]}`
	var mu sync.Mutex
	statuses := map[int]int{}
	end := time.Now().Add(*d)
	var wg sync.WaitGroup
	for range *conns {
		wg.Go(func() {
			for time.Now().Before(end) {
				req, _ := http.NewRequest(http.MethodPost, *url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer wrong-token")
				req.Header.Set("Content-Type", "application/json")
				st := -1
				if resp, err := client.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					st = resp.StatusCode
				}
				mu.Lock()
				statuses[st]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := 0
	keys := make([]int, 0, len(statuses))
	for k, n := range statuses {
		keys = append(keys, k)
		total += n
	}
	sort.Ints(keys)
	fmt.Printf("requests %d rps %.0f", total, float64(total)/d.Seconds())
	for _, k := range keys {
		fmt.Printf(" status_%d %d", k, statuses[k])
	}
	fmt.Println()
}
