package chart_test

// The dashboard and the alerts on a real Prometheus, in the topology of
// compose.yaml: a gateway built from this tree, serving the shipped
// configuration with deploy/compose/gateway.yaml (its state in a real
// redis-server), scraped by Prometheus every second with
// deploy/compose/prometheus.yml (only the target and the intervals
// changed) and its rule file deploy/compose/alerts.yml. After traffic that
// touches every panel (plain and streamed chats, a protocol agent, a
// redacted answer, an unpriced model, a policy denial, rate-limit
// refusals, an escalation decided, a Redis outage), every panel query of
// the dashboard returns data and every alert evaluates without error.
//
// Prometheus is Debian's package (apt-get install prometheus; CI installs
// it). Without it the test skips, loudly, unless the run requires it
// (GATEWAY_REQUIRE_PROMETHEUS=1, or CI set): then it fails.

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sacpgw/gateway/internal/testredis"
)

// The files of compose.yaml's monitoring, from the repository root.
const (
	composeFile     = "compose.yaml"
	promConfigFile  = "deploy/compose/prometheus.yml"
	alertsFile      = "deploy/compose/alerts.yml"
	gatewayOverlay  = "deploy/compose/gateway.yaml"
	dashboardFile   = "charts/gateway/files/grafana-dashboard.json"
	composeTarget   = "gateway:8080" // the gateway service and its port, as Prometheus reaches it in compose
	prometheusHint  = "prometheus not found: apt-get install -y prometheus (or set PROMETHEUS to its binary)"
	rateWindow      = "30s" // $__rate_interval: 30 scrapes at 1s
	queryPatience   = 30 * time.Second
	readyPatience   = 60 * time.Second
	gatewayDemoTok  = "gw-demo-copilot-2"
	protocolDemoTok = "gw-demo-claude-3"
	floodDemoTok    = "gw-demo-gemini-pro"
)

// TestComposeFiles: compose.yaml is the topology the Prometheus test runs:
// the four services, every file it mounts exists, Prometheus reads the
// scrape config and the rule file that test uses and scrapes the gateway
// service on its port, Grafana loads the chart's dashboard, and the rule
// file's alerts are those of docs/operations.md (which the chart's are,
// TestAlertsMatchOperationsDoc).
func TestComposeFiles(t *testing.T) {
	var compose obj
	readYAMLFile(t, composeFile, &compose)
	services, _ := get(compose, "services").(obj)
	for _, s := range []string{"redis", "gateway", "prometheus", "grafana"} {
		if services[s] == nil {
			t.Errorf("compose.yaml has no %s service", s)
		}
	}
	mounts := map[string][]string{} // service → the repository files it mounts
	for name, s := range services {
		for _, v := range list(s, "volumes") {
			src, _, ok := strings.Cut(fmt.Sprint(v), ":")
			if !ok || !strings.HasPrefix(src, "./") {
				t.Errorf("service %s: volume %q is not a file of the repository", name, v)
				continue
			}
			src = strings.TrimPrefix(src, "./")
			if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
				t.Errorf("service %s mounts %s: %v", name, src, err)
			}
			mounts[name] = append(mounts[name], src)
		}
	}
	for svc, want := range map[string][]string{
		"gateway":    {gatewayOverlay},
		"prometheus": {promConfigFile, alertsFile},
		"grafana":    {dashboardFile, "deploy/compose/grafana/datasource.yml", "deploy/compose/grafana/dashboards.yml"},
	} {
		for _, f := range want {
			if !slices.Contains(mounts[svc], f) {
				t.Errorf("compose.yaml: %s does not mount %s (mounts %v)", svc, f, mounts[svc])
			}
		}
	}
	// Prometheus scrapes the gateway service on the port it listens on.
	host, port, _ := net.SplitHostPort(composeTarget)
	if services[host] == nil || !slices.ContainsFunc(list(services, "gateway", "ports"), func(p any) bool { return strings.HasSuffix(fmt.Sprint(p), ":"+port) }) {
		t.Errorf("the scrape target %s is not compose.yaml's gateway service and port", composeTarget)
	}
	if target := scrapeTarget(t, readPromConfig(t)); target != composeTarget {
		t.Errorf("%s scrapes %q, want %q", promConfigFile, target, composeTarget)
	}

	var rules, md obj
	readYAMLFile(t, alertsFile, &rules)
	mdText, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	block, ok := yamlBlockAfter(string(mdText), "\n### Alerts\n")
	if !ok {
		t.Fatal(`no yaml block in docs/operations.md "### Alerts"`)
	}
	if err := yaml.Unmarshal([]byte(block), &md); err != nil {
		t.Fatal(err)
	}
	inFile, inDoc := alertRules(t, rules), alertRules(t, md)
	for n, want := range inDoc {
		got, ok := inFile[n]
		switch {
		case !ok:
			t.Errorf("alert %s is in docs/operations.md, not in %s", n, alertsFile)
		case norm(str(got, "expr")) != norm(str(want, "expr")) || str(got, "for") != str(want, "for") || str(got, "labels", "severity") != str(want, "labels", "severity"):
			t.Errorf("alert %s differs between %s and docs/operations.md", n, alertsFile)
		}
	}
	if len(inFile) != len(inDoc) {
		t.Errorf("%s has %d alerts, docs/operations.md %d", alertsFile, len(inFile), len(inDoc))
	}
}

// TestDashboardOnPrometheus: see the file's comment.
func TestDashboardOnPrometheus(t *testing.T) {
	prom := prometheusBin(t)
	redis := testredis.Start(t)
	tmp := t.TempDir()
	gw := startGateway(t, tmp, redis.URL())
	api := startPrometheus(t, prom, tmp, gw)

	driveTraffic(t, gw, redis)

	// Every panel's queries, Grafana's variables substituted as Grafana
	// would with "All" selected.
	var dash obj
	raw, err := os.ReadFile(filepath.Join(repoRoot, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", rateWindow, "$agent", ".*", "$upstream", ".*")
	type query struct{ where, expr string }
	var panels []query
	for _, p := range list(dash, "panels") {
		for i, tg := range list(p, "targets") {
			panels = append(panels, query{fmt.Sprintf("panel %q target %d", str(p, "title"), i), vars.Replace(str(tg, "expr"))})
		}
	}
	if len(panels) < 20 {
		t.Fatalf("%d panel queries in the dashboard", len(panels))
	}
	var wg sync.WaitGroup
	for _, q := range panels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := api.waitData(q.expr); err != nil {
				t.Errorf("%s: %v\n  %s", q.where, err, q.expr)
			}
		}()
	}
	// The variables' label_values(metric, label): the label's values
	// among the metric's series.
	for _, v := range list(dash, "templating", "list") {
		def := str(v, "definition")
		if def == "" {
			continue
		}
		metric, label, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(def, "label_values("), ")"), ",")
		if !ok {
			t.Errorf("variable %s: %q is not label_values(metric, label)", str(v, "name"), def)
			continue
		}
		// Its values: the label's among the metric's series, once scraped.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := api.waitData(fmt.Sprintf("group by (%s) (%s{%s!=\"\"})", label, metric, strings.TrimSpace(label))); err != nil {
				t.Errorf("variable %s (%s): %v", str(v, "name"), def, err)
			}
		}()
	}
	wg.Wait()

	// Every alert's expression evaluates (an alert that is not firing
	// has no data: only an error fails), and Prometheus's own evaluation
	// of the rule file reports no rule unhealthy.
	var rules obj
	readYAMLFile(t, alertsFile, &rules)
	for name, r := range alertRules(t, rules) {
		var res promResult
		if err := api.get("/api/v1/query?query="+url.QueryEscape(str(r, "expr")), &res); err != nil {
			t.Errorf("alert %s: %v\n  %s", name, err, str(r, "expr"))
		}
	}
	api.checkRules(t, len(alertRules(t, rules)))
}

// prometheusBin finds Prometheus, or ends the test: a failure when the run
// requires it, else a loud skip.
func prometheusBin(t *testing.T) string {
	t.Helper()
	name := os.Getenv("PROMETHEUS")
	if name == "" {
		name = "prometheus"
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if why := prometheusRequired(os.Getenv); why != "" {
		t.Fatalf("%s (%s: the dashboard must be tested on a real Prometheus)", prometheusHint, why)
	}
	fmt.Fprintf(os.Stderr, "SKIPPING THE PROMETHEUS TEST (charts/gateway): %s\n", prometheusHint)
	t.Skip("SKIPPING THE PROMETHEUS TEST: " + prometheusHint)
	return ""
}

// prometheusRequired says why this run requires Prometheus, or "".
func prometheusRequired(getenv func(string) string) string {
	if getenv("GATEWAY_REQUIRE_PROMETHEUS") == "1" {
		return "GATEWAY_REQUIRE_PROMETHEUS=1"
	}
	return strings.Replace(helmRequired(func(k string) string {
		if k == "GATEWAY_REQUIRE_HELM" {
			return "" // helm's own switch says nothing about Prometheus
		}
		return getenv(k)
	}), "HELM", "PROMETHEUS", 1)
}

func TestPrometheusRequired(t *testing.T) {
	for env, want := range map[string]bool{
		"": false, "CI=true": true, "CI=0": false, "CI=false": false,
		"GATEWAY_REQUIRE_PROMETHEUS=1": true, "GATEWAY_REQUIRE_HELM=1": false,
	} {
		k, v, _ := strings.Cut(env, "=")
		got := prometheusRequired(func(name string) string {
			if name == k {
				return v
			}
			return ""
		}) != ""
		if got != want {
			t.Errorf("%q: required %v, want %v", env, got, want)
		}
	}
}

// startGateway builds the gateway, lays out the compose service's files
// (the shipped config/ and rego/, deploy/compose/gateway.yaml as
// config/gateway.yaml) under dir and runs it on a free loopback port with
// its state in redisURL. It returns the gateway's base URL.
func startGateway(t *testing.T, dir, redisURL string) string {
	t.Helper()
	bin := filepath.Join(dir, "gateway")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "./cmd/gateway")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gateway: %v\n%s", err, out)
	}
	app := filepath.Join(dir, "app")
	for _, d := range []string{"config", "rego"} {
		if err := copyFiles(filepath.Join(repoRoot, d), filepath.Join(app, d)); err != nil {
			t.Fatal(err)
		}
	}
	overlay, err := os.ReadFile(filepath.Join(repoRoot, gatewayOverlay))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "config", "gateway.yaml"), overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logf, err := os.Create(filepath.Join(dir, "gateway.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", filepath.Join(app, "config"), "--listen", addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The mock serves the models used; a developer's key must not send
	// anything to OpenAI.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_API_KEY=") && !strings.HasPrefix(kv, "REDIS_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "REDIS_URL="+redisURL)
	base := "http://" + addr
	runUntilReady(t, cmd, logf, base+"/readyz", "gateway")
	return base
}

// runUntilReady starts cmd, stops it when the test ends, and waits until
// ready answers 200; the log is shown when it does not.
func runUntilReady(t *testing.T, cmd *exec.Cmd, logf *os.File, ready, what string) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s log (last 4 KB):\n%s", what, tail(b, 4<<10))
		}
	})
	for deadline := time.Now().Add(readyPatience); ; time.Sleep(100 * time.Millisecond) {
		select {
		case <-exited:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("%s exited at start:\n%s", what, tail(b, 4<<10))
		default:
		}
		if resp, err := http.Get(ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within %s", what, readyPatience)
		}
	}
}

// startPrometheus runs Prometheus on a free loopback port with the
// compose scrape config pointed at gateway, 1s intervals, the compose
// rule file and its own storage under dir.
func startPrometheus(t *testing.T, bin, dir, gateway string) *promAPI {
	t.Helper()
	cfg := readPromConfig(t)
	if target := scrapeTarget(t, cfg); target != composeTarget {
		t.Fatalf("%s scrapes %q, want %q", promConfigFile, target, composeTarget)
	}
	// What changes from compose: where the gateway is, and how often.
	setTarget(cfg, strings.TrimPrefix(gateway, "http://"))
	global, _ := cfg["global"].(obj)
	global["scrape_interval"], global["evaluation_interval"] = "1s", "1s"
	pdir := filepath.Join(dir, "prometheus")
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "prometheus.yml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(filepath.Join(repoRoot, alertsFile), filepath.Join(pdir, "alerts.yml")); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(pdir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(pdir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	runUntilReady(t, cmd, logf, "http://"+addr+"/-/ready", "prometheus")
	return &promAPI{base: "http://" + addr}
}

// driveTraffic sends what makes every panel's series exist and move.
func driveTraffic(t *testing.T, gw string, redis *testredis.Server) {
	t.Helper()
	chat := func(tok, model string, stream bool, content string) int {
		body, _ := json.Marshal(obj{"model": model, "stream": stream, "messages": []obj{{"role": "user", "content": content}}})
		return post(t, gw+"/v1/chat/completions", tok, string(body))
	}
	for i := range 4 {
		// Plain and streamed calls, an answer with an address to redact.
		for _, stream := range []bool{false, true} {
			if s := chat(gatewayDemoTok, "mock-1", stream, fmt.Sprintf("Write to ceo%d@example.com about the plan", i)); s != http.StatusOK {
				t.Fatalf("chat: %d", s)
			}
		}
		// A protocol agent's SACP answer.
		if s := chat(protocolDemoTok, "mock-1", i%2 == 1, "Summarise the plan"); s != http.StatusOK {
			t.Fatalf("protocol chat: %d", s)
		}
	}
	// A model without a price: a call of unknown cost.
	if s := chat(gatewayDemoTok, "mock-2", false, "hello"); s != http.StatusOK {
		t.Fatalf("unpriced chat: %d", s)
	}
	// A policy denial: a conversation over the chat policy's length.
	msgs := make([]obj, 1001)
	for i := range msgs {
		msgs[i] = obj{"role": "user", "content": "x"}
	}
	long, _ := json.Marshal(obj{"model": "mock-1", "messages": msgs})
	if s := post(t, gw+"/v1/chat/completions", floodDemoTok, string(long)); s != http.StatusForbidden {
		t.Fatalf("a conversation of 1001 messages: %d, want the policy's 403", s)
	}
	// Rate-limit refusals: past gemini-pro's 50 requests an hour.
	refused := 0
	for range 55 {
		if chat(floodDemoTok, "mock-1", false, "again") == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no rate-limit refusal")
	}
	// An escalation, decided.
	var esc struct {
		RequestID string `json:"request_id"`
		State     string `json:"state"`
	}
	postJSON(t, gw+"/agent/request", protocolDemoTok, `{"agent_id": "claude-3", "request_type": "APPROVAL", "action": "delete",
		"target_type": "architecture", "target_id": "arch-001", "content": "remove it", "rationale": "Nothing links to it any more"}`, &esc)
	if esc.State != "ESCALATED" {
		t.Fatalf("the architecture delete was not escalated: %+v", esc)
	}
	if s := post(t, gw+"/admin/escalations/"+esc.RequestID+"/decision", "gw-demo-reviewer", `{"decision": "approve", "comment": "ok"}`); s != http.StatusOK {
		t.Fatalf("decision: %d", s)
	}
	// Redis away for a moment: its errors, the limits falling back to
	// this replica's, and a 5xx: the approval state it holds cannot be read.
	redis.Stop()
	for range 3 {
		if s := chat(gatewayDemoTok, "mock-1", false, "while Redis is away"); s != http.StatusOK {
			t.Fatalf("chat without Redis (on_failure: local): %d", s)
		}
	}
	if s := getStatus(t, gw+"/agent/status/"+esc.RequestID, protocolDemoTok); s != http.StatusServiceUnavailable {
		t.Fatalf("an approval's status without Redis: %d, want 503", s)
	}
	redis.Restart()
}

// getStatus GETs u with the bearer token tok and returns the status.
func getStatus(t *testing.T, u, tok string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func post(t *testing.T, u, tok, body string) int {
	t.Helper()
	return postJSON(t, u, tok, body, nil)
}

// postJSON posts body with the bearer token tok and decodes the answer
// into out (when not nil); it returns the status.
func postJSON(t *testing.T, u, tok, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("POST %s: %d %s", u, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode
}

// promAPI is Prometheus's HTTP API.
type promAPI struct{ base string }

// promResult is an instant query's data.
type promResult struct {
	ResultType string `json:"resultType"`
	Result     []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	} `json:"result"`
}

// get calls the API and decodes its data; an answer that is not success
// is the error, with Prometheus's message.
func (p *promAPI) get(path string, data any) error {
	resp, err := http.Get(p.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("HTTP %d: %v", resp.StatusCode, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", env.ErrorType, env.Error)
	}
	return json.Unmarshal(env.Data, data)
}

// waitData queries expr until it returns at least one series: the
// scrapes after the traffic may still be on their way.
func (p *promAPI) waitData(expr string) error {
	deadline := time.Now().Add(queryPatience)
	for {
		var res promResult
		if err := p.get("/api/v1/query?query="+url.QueryEscape(expr), &res); err != nil {
			return err
		}
		if len(res.Result) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no data after %s", queryPatience)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkRules waits until Prometheus has evaluated the rule file's n rules
// and fails for any it reports unhealthy.
func (p *promAPI) checkRules(t *testing.T, n int) {
	t.Helper()
	type rule struct {
		Name      string `json:"name"`
		Health    string `json:"health"`
		LastError string `json:"lastError"`
	}
	for deadline := time.Now().Add(queryPatience); ; time.Sleep(500 * time.Millisecond) {
		var data struct {
			Groups []struct {
				Rules []rule `json:"rules"`
			} `json:"groups"`
		}
		if err := p.get("/api/v1/rules", &data); err != nil {
			t.Fatal(err)
		}
		var all []rule
		for _, g := range data.Groups {
			all = append(all, g.Rules...)
		}
		pending := len(all) != n
		for _, r := range all {
			switch r.Health {
			case "ok":
			case "unknown":
				pending = true
			default:
				t.Errorf("rule %s: %s %s", r.Name, r.Health, r.LastError)
			}
		}
		if !pending || t.Failed() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus evaluated %d rules of %d within %s: %+v", len(all), n, queryPatience, all)
		}
	}
}

// readPromConfig reads deploy/compose/prometheus.yml.
func readPromConfig(t *testing.T) obj {
	t.Helper()
	var cfg obj
	readYAMLFile(t, promConfigFile, &cfg)
	if rf := list(cfg, "rule_files"); len(rf) != 1 || rf[0] != "alerts.yml" {
		t.Fatalf("%s rule_files %v, want [alerts.yml] (compose mounts the rule file beside it)", promConfigFile, rf)
	}
	return cfg
}

// scrapeTarget is the one target of the config's one scrape job.
func scrapeTarget(t *testing.T, cfg obj) string {
	t.Helper()
	jobs := list(cfg, "scrape_configs")
	if len(jobs) != 1 || len(list(jobs[0], "static_configs")) != 1 || len(list(jobs[0], "static_configs", 0, "targets")) != 1 {
		t.Fatalf("%s: want one scrape job with one target, got %v", promConfigFile, jobs)
	}
	return str(jobs[0], "static_configs", 0, "targets", 0)
}

func setTarget(cfg obj, target string) {
	sc := list(cfg, "scrape_configs", 0, "static_configs")[0].(obj)
	sc["targets"] = []any{target}
}

func readYAMLFile(t *testing.T, rel string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// yamlBlockAfter is the first ```yaml block after heading in md.
func yamlBlockAfter(md, heading string) (string, bool) {
	i := strings.Index(md, heading)
	if i < 0 {
		return "", false
	}
	_, block, ok := strings.Cut(md[i+len(heading):], "```yaml\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	return block, ok
}

// copyFiles copies the tree src to dst, without Go files and test data
// (what the image's /app holds).
func copyFiles(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if strings.HasSuffix(p, ".go") {
			return nil
		}
		return copyFile(p, filepath.Join(dst, rel))
	})
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// freeAddr is a loopback address free when asked.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
