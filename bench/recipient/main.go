// Command recipient is the agent endpoint of bench/messages.sh: it answers
// every ACL REQUEST with a RESPONSE replying to its message_id (found by a
// byte search, so the recipient costs the same behind the gateway and
// behind the bare proxy).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"time"
)

const response = `{"message_type":"response","sender_id":"planner","receiver_id":"orch","in_reply_to":"%s","workflow_id":"%s","action":"plan_complete","payload":{"tasks":[{"task_id":"t1","description":"Fetch customer","agent_type":"executor"},{"task_id":"t2","description":"Update record","agent_type":"executor"}]},"status":"success"}`

// field returns the string value of "key":"..." in body.
func field(body []byte, key string) string {
	k := []byte(`"` + key + `":"`)
	i := bytes.Index(body, k)
	if i < 0 {
		return ""
	}
	rest := body[i+len(k):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 {
		return string(rest[:j])
	}
	return ""
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18084", "listen address")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("POST /messages", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, response, field(body, "message_id"), field(body, "workflow_id"))
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
