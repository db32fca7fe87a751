package chart_test

// The chart's Grafana dashboard (grafanaDashboard.enabled) and
// PrometheusRule (prometheusRule.enabled): they render only when asked
// (central mode), the dashboard is valid JSON, every metric they query is
// one the gateway exports, and the alerts are those docs/operations.md
// shows, with the same expressions.
//
// The gateway's metric names are read from its Go source: every
// "gateway_…" string literal outside tests, histograms being the names
// passed to a function whose name says histogram (metrics.New's helper).
// server/metrics_test.go scrapes a live /metrics for the new families.

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const (
	dashboardName = fullname + "-dashboard"
	repoRoot      = "../.."
)

var bothOn = []string{"grafanaDashboard.enabled=true", "prometheusRule.enabled=true"}

// TestObservabilityObjects: off by default and in sidecar mode; on, a
// ConfigMap Grafana's sidecar loads and a PrometheusRule with the
// configured labels and thresholds, and the rest of the chart unchanged.
func TestObservabilityObjects(t *testing.T) {
	helmBin(t)
	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		docs := render(t, ".", nil, nil)
		if d := find(docs, "ConfigMap", dashboardName); d != nil {
			t.Error("the dashboard ConfigMap is rendered with grafanaDashboard.enabled unset")
		}
		if l := ofKind(docs, "PrometheusRule"); len(l) > 0 {
			t.Error("a PrometheusRule is rendered with prometheusRule.enabled unset")
		}
	})
	t.Run("not in sidecar mode", func(t *testing.T) {
		t.Parallel()
		docs := render(t, ".", []string{"ci/sidecar-values.yaml"}, bothOn)
		if find(docs, "ConfigMap", dashboardName) != nil || len(ofKind(docs, "PrometheusRule")) > 0 {
			t.Error("sidecar mode renders the dashboard or the rules: its gateways listen on loopback, unscraped")
		}
	})
	t.Run("on", func(t *testing.T) {
		t.Parallel()
		docs := render(t, ".", nil, append([]string{
			"grafanaDashboard.labels.team=ops", "grafanaDashboard.annotations.grafana_folder=SACP",
			"prometheusRule.labels.release=kube-prometheus-stack", "prometheusRule.thresholds.ttftP95Seconds=4",
		}, bothOn...))
		checkCentral(docs, centralWant{persistence: true, agents: defaultAgents}).report(t)

		cm := find(docs, "ConfigMap", dashboardName)
		if cm == nil {
			t.Fatalf("no ConfigMap %s", dashboardName)
		}
		for k, v := range map[string]string{"grafana_dashboard": "1", "team": "ops", "app.kubernetes.io/instance": release} {
			if got := str(cm, "metadata", "labels", k); got != v {
				t.Errorf("dashboard ConfigMap label %s = %q, want %q", k, got, v)
			}
		}
		if got := str(cm, "metadata", "annotations", "grafana_folder"); got != "SACP" {
			t.Errorf("dashboard ConfigMap annotation grafana_folder = %q", got)
		}
		raw := str(cm, "data", "sacp-gateway.json")
		file, err := os.ReadFile("files/grafana-dashboard.json")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(raw) != strings.TrimSpace(string(file)) {
			t.Error("the ConfigMap's dashboard is not files/grafana-dashboard.json as it is")
		}

		rule := ofKind(docs, "PrometheusRule")
		if len(rule) != 1 {
			t.Fatalf("%d PrometheusRules, want 1", len(rule))
		}
		r := rule[0]
		if str(r, "apiVersion") != "monitoring.coreos.com/v1" || str(r, "metadata", "labels", "release") != "kube-prometheus-stack" {
			t.Errorf("PrometheusRule apiVersion %q labels %v", str(r, "apiVersion"), get(r, "metadata", "labels"))
		}
		rules := alertRules(t, r)
		if ttft := rules["GatewayTTFTSlow"]; !strings.HasSuffix(norm(str(ttft, "expr")), "> 4") {
			t.Errorf("GatewayTTFTSlow with thresholds.ttftP95Seconds=4: %q", str(ttft, "expr"))
		}
		for n, a := range rules {
			sev := str(a, "labels", "severity")
			if !slices.Contains([]string{"critical", "warning", "info"}, sev) || str(a, "annotations", "summary") == "" || str(a, "annotations", "description") == "" {
				t.Errorf("alert %s: severity %q, summary %q, description %q", n, sev, str(a, "annotations", "summary"), str(a, "annotations", "description"))
			}
			if strings.Contains(str(a, "annotations", "description"), `{{ "`) {
				t.Errorf("alert %s: the description's Prometheus template was not unescaped: %q", n, str(a, "annotations", "description"))
			}
		}
	})
}

// alertRules maps each alert of a PrometheusRule (or of a rule file's
// groups) to its rule, failing on duplicates.
func alertRules(t *testing.T, doc obj) map[string]obj {
	t.Helper()
	groups := list(doc, "spec", "groups")
	if groups == nil {
		groups = list(doc, "groups")
	}
	out := map[string]obj{}
	for _, g := range groups {
		for _, r := range list(g, "rules") {
			rule, _ := r.(obj)
			n := str(rule, "alert")
			if n == "" {
				t.Errorf("a rule without an alert name: %v", rule)
				continue
			}
			if _, dup := out[n]; dup {
				t.Errorf("alert %s defined twice", n)
			}
			out[n] = rule
		}
	}
	if len(out) == 0 {
		t.Fatal("no alerts")
	}
	return out
}

// norm collapses the white space of a PromQL expression.
func norm(expr string) string { return strings.Join(strings.Fields(expr), " ") }

// TestObservabilityMetricNames: every metric the dashboard and the alerts
// query is exported by the gateway (a histogram's _bucket, _sum and _count
// included), so a renamed or mistyped metric fails here rather than as an
// empty panel or an alert that never fires.
func TestObservabilityMetricNames(t *testing.T) {
	helmBin(t)
	known := gatewayMetrics(t)
	for _, want := range []string{"gateway_ttft_seconds", "gateway_inter_token_seconds", "gateway_agent_request_duration_seconds", "gateway_spend_usd_total"} {
		if _, ok := known[want]; !ok {
			t.Fatalf("the metric inventory from the Go source lacks %s: %v", want, known)
		}
	}
	// The resolver itself: histogram series only for histograms.
	for name, want := range map[string]bool{
		"gateway_ttft_seconds_bucket": true, "gateway_requests_total": true, "gateway_requests_total_count": false,
		"gateway_audit_fsync_seconds_total": true, "gateway_audit_fsync_seconds_total_sum": false, "gateway_ttft_second_bucket": false,
	} {
		if got := exported(known, name); got != want {
			t.Errorf("exported(%s) = %v, want %v", name, got, want)
		}
	}

	docs := render(t, ".", nil, bothOn)
	exprs := map[string]string{} // where → PromQL
	var dash map[string]any
	if err := json.Unmarshal([]byte(str(find(docs, "ConfigMap", dashboardName), "data", "sacp-gateway.json")), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if dash["uid"] == "" || dash["title"] == "" {
		t.Errorf("dashboard uid %v title %v", dash["uid"], dash["title"])
	}
	ids := map[float64]bool{}
	panels := 0
	for _, p := range list(dash, "panels") {
		p := p.(obj)
		id, _ := p["id"].(float64)
		if ids[id] {
			t.Errorf("panel id %v used twice", id)
		}
		ids[id] = true
		if str(p, "type") == "row" {
			continue
		}
		panels++
		targets := list(p, "targets")
		if len(targets) == 0 || str(p, "datasource", "uid") != "${datasource}" {
			t.Errorf("panel %q: %d targets, datasource %v", str(p, "title"), len(targets), get(p, "datasource"))
		}
		for i, tg := range targets {
			exprs["panel "+strconv.Quote(str(p, "title"))+" target "+strconv.Itoa(i)] = str(tg, "expr")
		}
	}
	for _, v := range list(dash, "templating", "list") {
		if q := str(v, "definition"); q != "" {
			exprs["variable "+str(v, "name")] = q
		}
	}
	for n, r := range alertRules(t, ofKind(docs, "PrometheusRule")[0]) {
		exprs["alert "+n] = str(r, "expr")
	}
	if panels < 20 {
		t.Errorf("%d dashboard panels", panels)
	}

	metricRef := regexp.MustCompile(`\bgateway_[a-zA-Z0-9_]+`)
	used := map[string]bool{}
	for where, e := range exprs {
		if strings.TrimSpace(e) == "" {
			t.Errorf("%s: empty expression", where)
			continue
		}
		if err := balanced(e); err != "" {
			t.Errorf("%s: %s in %q", where, err, e)
		}
		refs := metricRef.FindAllString(e, -1)
		if len(refs) == 0 {
			t.Errorf("%s queries no gateway metric: %q", where, e)
		}
		for _, m := range refs {
			used[m] = true
			if !exported(known, m) {
				t.Errorf("%s queries %s, which the gateway does not export", where, m)
			}
		}
	}
	// What the operators' issue asked the dashboard and the alerts for.
	for _, m := range []string{
		"gateway_agent_request_duration_seconds_bucket", "gateway_ttft_seconds_bucket", "gateway_inter_token_seconds_bucket",
		"gateway_spend_usd_total", "gateway_ratelimit_rejections_total", "gateway_policy_decisions_total",
		"gateway_approval_escalations_total", "gateway_audit_fsync_seconds_total", "gateway_audit_lost_total",
		"gateway_upstream_failovers_total", "gateway_upstream_breaker_opens_total", "gateway_upstream_breakers_open",
		"gateway_policy_reload_failed", "gateway_state_redis_errors_total",
	} {
		if !used[m] {
			t.Errorf("neither the dashboard nor the alerts query %s", m)
		}
	}
}

// balanced reports unbalanced brackets or quotes in a PromQL expression
// ("" when balanced): a cheap syntax check without a PromQL parser.
func balanced(e string) string {
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	var quote rune
	for _, r := range e {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'' || r == '`':
			quote = r
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return "unbalanced " + string(r)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if quote != 0 || len(stack) > 0 {
		return "unclosed bracket or quote"
	}
	return ""
}

// exported reports whether name is a series name the gateway exports.
func exported(known map[string]bool, name string) bool {
	if _, ok := known[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && known[base] {
			return true
		}
	}
	return false
}

// gatewayMetrics reads the gateway's metric names from its Go source
// (tests, the charts and testdata aside): name → whether it is a histogram.
func gatewayMetrics(t *testing.T) map[string]bool {
	t.Helper()
	name := regexp.MustCompile(`^gateway_[a-z0-9_]+$`)
	out := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if b := d.Name(); path != repoRoot && (strings.HasPrefix(b, ".") || b == "testdata" || b == "charts" || b == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		lit := func(e ast.Expr) (string, bool) {
			b, ok := e.(*ast.BasicLit)
			if !ok || b.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(b.Value)
			return s, err == nil && name.MatchString(s)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, ok := lit(n); ok {
					if _, seen := out[s]; !seen {
						out[s] = false
					}
				}
			case *ast.CallExpr:
				if len(n.Args) == 0 || !strings.Contains(strings.ToLower(callee(n.Fun)), "histogram") {
					return true
				}
				if s, ok := lit(n.Args[0]); ok {
					out[s] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// callee is the name of a called function (f, pkg.F or x.f).
func callee(e ast.Expr) string {
	switch f := e.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// TestAlertsMatchOperationsDoc: docs/operations.md ("Alerts") shows the
// rules the chart ships, with the default thresholds: the same alerts,
// expressions, durations and severities, none missing on either side.
func TestAlertsMatchOperationsDoc(t *testing.T) {
	helmBin(t)
	md, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	const heading = "\n### Alerts\n"
	i := strings.Index(string(md), heading)
	if i < 0 {
		t.Fatal(`docs/operations.md has no "### Alerts" section`)
	}
	_, block, ok := strings.Cut(string(md[i+len(heading):]), "```yaml\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatal(`no yaml block in docs/operations.md "### Alerts"`)
	}
	var doc obj
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
		t.Fatalf("the alerts of docs/operations.md do not parse: %v", err)
	}
	inDoc := alertRules(t, doc)
	inChart := alertRules(t, ofKind(render(t, ".", nil, []string{"prometheusRule.enabled=true"}), "PrometheusRule")[0])
	for n, want := range inChart {
		got, ok := inDoc[n]
		if !ok {
			t.Errorf("alert %s is in the chart, not in docs/operations.md", n)
			continue
		}
		for _, f := range []string{"expr", "for"} {
			if norm(str(got, f)) != norm(str(want, f)) {
				t.Errorf("alert %s %s: docs %q, chart %q", n, f, norm(str(got, f)), norm(str(want, f)))
			}
		}
		if str(got, "labels", "severity") != str(want, "labels", "severity") {
			t.Errorf("alert %s severity: docs %q, chart %q", n, str(got, "labels", "severity"), str(want, "labels", "severity"))
		}
	}
	for n := range inDoc {
		if _, ok := inChart[n]; !ok {
			t.Errorf("alert %s is in docs/operations.md, not in the chart", n)
		}
	}
}
