// Package chart_test renders the Helm chart in this directory with helm and
// asserts on the manifests: central mode (StatefulSet, Services, PDB, HPA,
// ServiceMonitor, ConfigMaps, Secrets) and sidecar mode (loopback gateway
// container next to an agent), plus `helm lint --strict` for every ci/ values
// file. The package lives in the chart directory; .helmignore keeps it out of
// the packaged chart.
//
// It needs a helm binary: $HELM, else helm on PATH. Without one the tests
// fail when the run requires helm (GATEWAY_REQUIRE_HELM=1, or CI set, as
// .ci/run and CI services do): a green CI run must not mean "the chart was
// never rendered". Elsewhere they skip, with a notice on stderr (shown by go
// test in this directory or with -v; `go test ./...` prints only "ok").
//
//	GOBIN=$PWD/bin go install helm.sh/helm/v3/cmd/helm@v3.22.0
//	HELM=$PWD/bin/helm go test ./charts/gateway/
package chart_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const (
	release   = "gw"
	namespace = "gw-test"
	fullname  = "gw-gateway" // gateway.fullname for release "gw"
)

// helmBin returns the helm binary ($HELM, else helm on PATH); without one
// the test fails or skips (noHelm).
func helmBin(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		p, err := exec.LookPath(h)
		if err != nil {
			t.Fatalf("HELM=%q is not an executable: %v", h, err)
		}
		return p
	}
	p, err := exec.LookPath("helm")
	if err != nil {
		noHelm(t, os.Getenv, os.Stderr)
	}
	return p
}

const helmMissing = "helm not found: set HELM or install it with GOBIN=$PWD/bin go install helm.sh/helm/v3/cmd/helm@v3.22.0"

// skipFailer is what noHelm needs of a test (a fake in TestNoHelm).
type skipFailer interface {
	Helper()
	Fatalf(format string, args ...any)
	Skip(args ...any)
}

var skipNotice sync.Once

// noHelm ends a test that has no helm: a failure when the run requires
// helm (GATEWAY_REQUIRE_HELM=1, or CI set to anything but false or 0),
// else a skip, announced once on stderr besides the skip message.
func noHelm(t skipFailer, getenv func(string) string, stderr io.Writer) {
	t.Helper()
	if why := helmRequired(getenv); why != "" {
		t.Fatalf("%s (%s: the chart tests must run)", helmMissing, why)
		return
	}
	skipNotice.Do(func() {
		fmt.Fprintf(stderr, "SKIPPING CHART TESTS (charts/gateway): %s\n", helmMissing)
	})
	t.Skip("SKIPPING CHART TESTS: " + helmMissing)
}

// helmRequired says why this run requires helm, or "" when it does not.
func helmRequired(getenv func(string) string) string {
	if getenv("GATEWAY_REQUIRE_HELM") == "1" {
		return "GATEWAY_REQUIRE_HELM=1"
	}
	switch v := strings.ToLower(getenv("CI")); v {
	case "", "0", "false":
		return ""
	default:
		return "CI=" + v
	}
}

// runHelm runs helm with args and returns its stdout; stderr goes into the error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No user config or repositories leak into the test.
	home := t.TempDir()
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

type obj = map[string]any

// render runs `helm template` on chart with the values files and --set pairs
// and decodes every non-empty document.
func render(t *testing.T, chart string, valuesFiles []string, set []string) []obj {
	t.Helper()
	args := []string{"template", release, chart, "--namespace", namespace}
	for _, f := range valuesFiles {
		args = append(args, "-f", f)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := decodeAll(out)
	if err != nil {
		t.Fatalf("decoding helm template output: %v", err)
	}
	if len(docs) == 0 {
		t.Fatalf("helm template rendered no objects")
	}
	return docs
}

func decodeAll(s string) ([]obj, error) {
	dec := yaml.NewDecoder(strings.NewReader(s))
	var docs []obj
	for {
		var d obj
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// get walks m along path (string keys, int indexes); nil when absent.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(obj)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k < 0 || k >= len(l) {
				return nil
			}
			v = l[k]
		default:
			panic(fmt.Sprintf("bad path element %T", p))
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...any) []any {
	l, _ := get(v, path...).([]any)
	return l
}

func kind(d obj) string { return str(d, "kind") }
func name(d obj) string { return str(d, "metadata", "name") }

func find(docs []obj, k, n string) obj {
	for _, d := range docs {
		if kind(d) == k && name(d) == n {
			return d
		}
	}
	return nil
}

func ofKind(docs []obj, k string) []obj {
	var out []obj
	for _, d := range docs {
		if kind(d) == k {
			out = append(out, d)
		}
	}
	return out
}

// byName returns the element of a list of objects whose "name" is n.
func byName(l []any, n string) obj {
	for _, e := range l {
		if m, ok := e.(obj); ok && m["name"] == n {
			return m
		}
	}
	return nil
}

// problems collects assertion failures so checkers can be tested themselves.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func (p problems) report(t *testing.T) {
	t.Helper()
	for _, s := range p {
		t.Error(s)
	}
}

// subset reports whether every key of sel is in labels with the same value.
func subset(sel, labels any) bool {
	s, _ := sel.(obj)
	l, _ := labels.(obj)
	if len(s) == 0 {
		return false
	}
	for k, v := range s {
		if l[k] != v {
			return false
		}
	}
	return true
}

// checkContainerSecurity asserts the hardening of a container's securityContext.
func checkContainerSecurity(p *problems, what string, c obj) {
	sc, _ := c["securityContext"].(obj)
	if sc == nil {
		p.add("%s: no securityContext", what)
		return
	}
	if sc["runAsNonRoot"] != true {
		p.add("%s: securityContext.runAsNonRoot = %v, want true", what, sc["runAsNonRoot"])
	}
	if sc["readOnlyRootFilesystem"] != true {
		p.add("%s: securityContext.readOnlyRootFilesystem = %v, want true", what, sc["readOnlyRootFilesystem"])
	}
	if sc["allowPrivilegeEscalation"] != false {
		p.add("%s: securityContext.allowPrivilegeEscalation = %v, want false", what, sc["allowPrivilegeEscalation"])
	}
	if drop := list(sc, "capabilities", "drop"); !slices.Contains(drop, any("ALL")) {
		p.add("%s: securityContext.capabilities.drop = %v, want ALL", what, drop)
	}
	if add := list(sc, "capabilities", "add"); len(add) > 0 {
		p.add("%s: securityContext.capabilities.add = %v, want none", what, add)
	}
}

// checkPodNameEnv asserts POD_NAME comes from the downward API (the audit chain name).
func checkPodNameEnv(p *problems, what string, c obj) {
	e := byName(list(c, "env"), "POD_NAME")
	if e == nil {
		p.add("%s: no POD_NAME env", what)
		return
	}
	if fp := str(e, "valueFrom", "fieldRef", "fieldPath"); fp != "metadata.name" {
		p.add("%s: POD_NAME valueFrom.fieldRef.fieldPath = %q, want metadata.name", what, fp)
	}
}

// checkVolumes asserts every volumeMount of c names a pod volume and every
// ConfigMap/Secret volume refers to a rendered object (or to an allowed
// external Secret).
func checkVolumes(p *problems, what string, docs []obj, pod obj, c obj, claimTemplates []any, externalSecrets []string) {
	vols := list(pod, "volumes")
	for _, m := range list(c, "volumeMounts") {
		n := str(m, "name")
		if byName(vols, n) == nil && !hasClaimTemplate(claimTemplates, n) {
			p.add("%s: volumeMount %q (%s) has no volume", what, n, str(m, "mountPath"))
		}
	}
	for _, v := range vols {
		if cm := str(v, "configMap", "name"); cm != "" && find(docs, "ConfigMap", cm) == nil {
			p.add("%s: volume %q refers to ConfigMap %q, not rendered", what, str(v, "name"), cm)
		}
		if s := str(v, "secret", "secretName"); s != "" && find(docs, "Secret", s) == nil && !slices.Contains(externalSecrets, s) {
			p.add("%s: volume %q refers to Secret %q, neither rendered nor expected to exist", what, str(v, "name"), s)
		}
	}
}

func hasClaimTemplate(tpls []any, n string) bool {
	for _, t := range tpls {
		if str(t, "metadata", "name") == n {
			return true
		}
	}
	return false
}

// configMapYAML decodes one YAML file of a ConfigMap's data.
func configMapYAML(p *problems, cm obj, key string) obj {
	s, ok := get(cm, "data", key).(string)
	if !ok {
		p.add("ConfigMap %s: no data key %q", name(cm), key)
		return nil
	}
	var out obj
	if err := yaml.Unmarshal([]byte(s), &out); err != nil {
		p.add("ConfigMap %s: %s does not parse: %v", name(cm), key, err)
	}
	return out
}

// checkConfigMaps asserts the gateway's ConfigMaps (both modes): the config
// files and the catalogue; the policies are the image's, of which the chart
// keeps no copy. It returns gateway.yaml.
func checkConfigMaps(p *problems, docs []obj, wantAgents []string) obj {
	cfg := find(docs, "ConfigMap", fullname+"-config")
	if cfg == nil {
		p.add("no ConfigMap %s-config", fullname)
		return nil
	}
	gw := configMapYAML(p, cfg, "gateway.yaml")
	agents := configMapYAML(p, cfg, "agents.yaml")
	if protocol := configMapYAML(p, cfg, "protocol.yaml"); protocol != nil && get(protocol, "protocol", "version") == nil {
		p.add("protocol.yaml: no protocol.version")
	}
	if reg := configMapYAML(p, cfg, "registry.yaml"); reg != nil {
		if verbs, _ := get(reg, "registry", "verbs").([]any); len(verbs) == 0 {
			p.add("registry.yaml: no registry.verbs")
		}
	}
	if s, _ := get(cfg, "data", "rbac_model.conf").(string); !strings.Contains(s, "[request_definition]") {
		p.add("ConfigMap %s: rbac_model.conf missing or not a casbin model", name(cfg))
	}
	if gw != nil {
		for _, c := range []struct {
			path []any
			want string
		}{
			{[]any{"audit", "dir"}, "/data/audit"},
			{[]any{"audit", "chain"}, "${POD_NAME:-}"},
			{[]any{"policy", "dir"}, "/app/rego"},
		} {
			if got := str(gw, c.path...); got != c.want {
				p.add("gateway.yaml %v = %q, want %q", c.path, got, c.want)
			}
		}
	}
	if agents != nil {
		var ids []string
		for id := range get(agents, "agents").(obj) {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, wantAgents) {
			p.add("agents.yaml agents = %v, want %v", ids, wantAgents)
		}
	}

	if pol := find(docs, "ConfigMap", fullname+"-policies"); pol != nil {
		p.add("ConfigMap %s: the chart renders policies nobody asked for (the image carries them)", name(pol))
	}
	for _, suffix := range []string{"-schemas", "-catalogue"} {
		cm := find(docs, "ConfigMap", fullname+suffix)
		if cm == nil {
			p.add("no ConfigMap %s%s", fullname, suffix)
		} else if d, _ := cm["data"].(obj); len(d) == 0 {
			p.add("ConfigMap %s is empty", name(cm))
		}
	}
	return gw
}

// checkEnvSources asserts REDIS_URL and the upstream key Secret of container c.
func checkEnvSources(p *problems, what string, docs []obj, c obj, w envWant) {
	redis := byName(list(c, "env"), "REDIS_URL")
	switch {
	case w.redisSecret == "" && redis != nil:
		p.add("%s: REDIS_URL env set without Redis", what)
	case w.redisSecret != "" && redis == nil:
		p.add("%s: no REDIS_URL env", what)
	case w.redisSecret != "":
		ref, _ := get(redis, "valueFrom", "secretKeyRef").(obj)
		if str(ref, "name") != w.redisSecret || str(ref, "key") != w.redisKey {
			p.add("%s: REDIS_URL secretKeyRef = %v, want %s/%s", what, ref, w.redisSecret, w.redisKey)
		}
		if w.redisURL != "" {
			if s := find(docs, "Secret", w.redisSecret); s == nil {
				p.add("no Secret %s for REDIS_URL", w.redisSecret)
			} else if got := str(s, "stringData", w.redisKey); got != w.redisURL {
				p.add("Secret %s %s = %q, want %q", w.redisSecret, w.redisKey, got, w.redisURL)
			}
		}
	}

	var refs []string
	for _, e := range list(c, "envFrom") {
		if n := str(e, "secretRef", "name"); n != "" {
			refs = append(refs, n)
		}
	}
	if w.upstreamSecret == "" {
		if len(refs) > 0 {
			p.add("%s: envFrom secretRefs %v, want none", what, refs)
		}
		return
	}
	if !slices.Contains(refs, w.upstreamSecret) {
		p.add("%s: envFrom secretRefs %v, want %s (upstream key)", what, refs, w.upstreamSecret)
	}
	if w.upstreamKey != "" {
		s := find(docs, "Secret", w.upstreamSecret)
		if s == nil {
			p.add("no Secret %s for the upstream key", w.upstreamSecret)
		} else if str(s, "stringData", w.upstreamKey) == "" {
			p.add("Secret %s: no %s", w.upstreamSecret, w.upstreamKey)
		}
	}
}

type envWant struct {
	redisSecret, redisKey string // REDIS_URL secretKeyRef; "" = no Redis
	redisURL              string // the chart-created Secret's value; "" = existing Secret
	upstreamSecret        string // envFrom secretRef with the provider key; "" = none
	upstreamKey           string // key of the chart-created Secret; "" = existing Secret
}

type centralWant struct {
	envWant
	persistence    bool
	hpa            bool
	serviceMonitor bool
	agents         []string
	signingSecret  string // audit.signingKeySecret (an external Secret)
	healthPort     int    // health.port; 0 = the default
}

// defaultHealthPort is values.yaml's health.port.
const defaultHealthPort = 8081

func orDefaultHealth(port int) int {
	if port == 0 {
		return defaultHealthPort
	}
	return port
}

// checkCentral asserts the central-mode manifests.
func checkCentral(docs []obj, w centralWant) problems {
	var p problems
	gw := checkConfigMaps(&p, docs, w.agents)

	sts := find(docs, "StatefulSet", fullname)
	if sts == nil {
		p.add("no StatefulSet %s (kinds: %v)", fullname, kinds(docs))
		return p
	}
	if n := len(ofKind(docs, "StatefulSet")); n != 1 {
		p.add("%d StatefulSets, want 1", n)
	}
	if ds := ofKind(docs, "Deployment"); len(ds) > 0 {
		p.add("central mode renders Deployments: %v", names(ds))
	}
	pod, _ := get(sts, "spec", "template", "spec").(obj)
	podLabels := get(sts, "spec", "template", "metadata", "labels")
	c := byName(list(pod, "containers"), "gateway")
	if c == nil {
		p.add("StatefulSet: no container gateway")
		return p
	}
	const what = "StatefulSet container gateway"

	// Audit volume: one claim per replica, or an emptyDir without persistence.
	tpls := list(sts, "spec", "volumeClaimTemplates")
	mount := byName(list(c, "volumeMounts"), "audit")
	if str(mount, "mountPath") != "/data/audit" {
		p.add("%s: audit volume not mounted at /data/audit (%v)", what, mount)
	}
	if w.persistence {
		if !hasClaimTemplate(tpls, "audit") {
			p.add("StatefulSet: no volumeClaimTemplate audit (persistence.enabled)")
		} else if s := str(tpls[0], "spec", "resources", "requests", "storage"); s == "" {
			p.add("StatefulSet: volumeClaimTemplate audit without a storage request")
		}
		if byName(list(pod, "volumes"), "audit") != nil {
			p.add("StatefulSet: pod volume audit shadows the volumeClaimTemplate")
		}
	} else {
		if len(tpls) > 0 {
			p.add("StatefulSet: volumeClaimTemplates without persistence")
		}
		if v := byName(list(pod, "volumes"), "audit"); get(v, "emptyDir") == nil {
			p.add("StatefulSet: audit volume is %v, want an emptyDir", v)
		}
	}
	checkVolumes(&p, what, docs, pod, c, tpls, []string{w.signingSecret})

	checkPodNameEnv(&p, what, c)
	checkEnvSources(&p, what, docs, c, w.envWant)

	// Probes on the health port (health_listen), plain HTTP: the main port
	// may require TLS or a client certificate the kubelet does not have.
	for _, pr := range []struct{ field, path string }{
		{"livenessProbe", "/healthz"},
		{"readinessProbe", "/readyz"},
		{"startupProbe", "/healthz"},
	} {
		if got := str(c, pr.field, "httpGet", "path"); got != pr.path {
			p.add("%s: %s.httpGet.path = %q, want %q", what, pr.field, got, pr.path)
		}
		if got := get(c, pr.field, "httpGet", "port"); got != "health" {
			p.add("%s: %s.httpGet.port = %v, want health", what, pr.field, got)
		}
		if got := str(c, pr.field, "httpGet", "scheme"); got != "HTTP" {
			p.add("%s: %s.httpGet.scheme = %q, want HTTP (the health port never does TLS)", what, pr.field, got)
		}
	}
	port := byName(list(c, "ports"), "http")
	if port == nil {
		p.add("%s: no port named http", what)
	}
	healthPort := orDefaultHealth(w.healthPort)
	if hp := byName(list(c, "ports"), "health"); hp == nil {
		p.add("%s: no port named health", what)
	} else if got := get(hp, "containerPort"); got != healthPort {
		p.add("%s: port health = %v, want %d", what, got, healthPort)
	}
	if gw != nil {
		if got, want := str(gw, "health_listen"), fmt.Sprintf(":%d", healthPort); got != want {
			p.add("gateway.yaml health_listen = %q, want %q (the container's health port, every interface)", got, want)
		}
	}
	// The health port is for the kubelet; only the NetworkPolicy admits
	// other sources to it (see below), no Service publishes it.
	for _, s := range ofKind(docs, "Service") {
		for _, sp := range list(s, "spec", "ports") {
			if tp := get(sp, "targetPort"); tp == "health" || tp == healthPort {
				p.add("Service %s exposes the health port", name(s))
			}
		}
	}
	if np := find(docs, "NetworkPolicy", fullname); np != nil && !admitsPort(np, "health") {
		p.add("NetworkPolicy: no ingress rule admits the health port: the kubelet's probes may be dropped")
	}
	if !slices.Contains(list(c, "args"), any("--listen")) {
		p.add("%s: args %v without --listen", what, list(c, "args"))
	}

	checkContainerSecurity(&p, what, c)
	if get(pod, "securityContext", "runAsNonRoot") != true {
		p.add("StatefulSet: pod securityContext.runAsNonRoot = %v, want true", get(pod, "securityContext", "runAsNonRoot"))
	}
	if get(pod, "automountServiceAccountToken") != false {
		p.add("StatefulSet: automountServiceAccountToken = %v, want false", get(pod, "automountServiceAccountToken"))
	}

	// Grace period above the gateway's own shutdown timeout.
	grace, ok := get(pod, "terminationGracePeriodSeconds").(int)
	if !ok {
		p.add("StatefulSet: no terminationGracePeriodSeconds")
	} else if gw != nil {
		st := str(gw, "shutdown_timeout")
		d, err := time.ParseDuration(st)
		switch {
		case err != nil:
			p.add("gateway.yaml shutdown_timeout %q: %v", st, err)
		case time.Duration(grace)*time.Second <= d:
			p.add("StatefulSet: terminationGracePeriodSeconds %d is not above gateway.yaml shutdown_timeout %s", grace, st)
		}
	}

	// Redis switches the state backend.
	if gw != nil {
		backend, url := "memory", "${REDIS_URL:-}"
		if w.redisSecret != "" {
			backend, url = "redis", "${REDIS_URL}"
		}
		if got := str(gw, "state", "backend"); got != backend {
			p.add("gateway.yaml state.backend = %q, want %q", got, backend)
		}
		if got := str(gw, "state", "redis_url"); got != url {
			p.add("gateway.yaml state.redis_url = %q, want %q", got, url)
		}
	}

	// Client Service and headless Service, both on the container's named port.
	svc := find(docs, "Service", fullname)
	headless := find(docs, "Service", fullname+"-headless")
	for _, s := range []obj{svc, headless} {
		if s == nil {
			continue
		}
		if !subset(get(s, "spec", "selector"), podLabels) {
			p.add("Service %s: selector %v does not select the pods %v", name(s), get(s, "spec", "selector"), podLabels)
		}
		if tp := get(s, "spec", "ports", 0, "targetPort"); tp != "http" {
			p.add("Service %s: targetPort %v, want http", name(s), tp)
		}
	}
	if svc == nil {
		p.add("no Service %s", fullname)
	} else if str(svc, "spec", "clusterIP") == "None" {
		p.add("Service %s is headless", fullname)
	}
	if headless == nil {
		p.add("no headless Service %s-headless", fullname)
	} else {
		if str(headless, "spec", "clusterIP") != "None" {
			p.add("Service %s: clusterIP %v, want None", name(headless), get(headless, "spec", "clusterIP"))
		}
		if got := str(sts, "spec", "serviceName"); got != name(headless) {
			p.add("StatefulSet serviceName %q, want %q", got, name(headless))
		}
	}

	// PDB on the pods.
	if pdb := find(docs, "PodDisruptionBudget", fullname); pdb == nil {
		p.add("no PodDisruptionBudget %s", fullname)
	} else {
		if !subset(get(pdb, "spec", "selector", "matchLabels"), podLabels) {
			p.add("PodDisruptionBudget: selector does not select the pods")
		}
		if get(pdb, "spec", "minAvailable") == nil && get(pdb, "spec", "maxUnavailable") == nil {
			p.add("PodDisruptionBudget: neither minAvailable nor maxUnavailable")
		}
	}

	// HPA replaces spec.replicas.
	hpa := find(docs, "HorizontalPodAutoscaler", fullname)
	switch {
	case w.hpa && hpa == nil:
		p.add("no HorizontalPodAutoscaler %s (autoscaling.enabled)", fullname)
	case w.hpa:
		if k, n := str(hpa, "spec", "scaleTargetRef", "kind"), str(hpa, "spec", "scaleTargetRef", "name"); k != "StatefulSet" || n != fullname {
			p.add("HorizontalPodAutoscaler targets %s/%s, want StatefulSet/%s", k, n, fullname)
		}
		if get(sts, "spec", "replicas") != nil {
			p.add("StatefulSet sets replicas while the HPA scales it")
		}
	case hpa != nil:
		p.add("HorizontalPodAutoscaler rendered without autoscaling.enabled")
	default:
		if get(sts, "spec", "replicas") == nil {
			p.add("StatefulSet: no replicas without an HPA")
		}
	}

	sm := find(docs, "ServiceMonitor", fullname)
	switch {
	case w.serviceMonitor && sm == nil:
		p.add("no ServiceMonitor %s (serviceMonitor.enabled)", fullname)
	case w.serviceMonitor:
		if ep := get(sm, "spec", "endpoints", 0); str(ep, "path") != "/metrics" || str(ep, "port") != "http" {
			p.add("ServiceMonitor endpoint %v, want port http path /metrics", ep)
		}
		if svc != nil && !subset(get(sm, "spec", "selector", "matchLabels"), get(svc, "metadata", "labels")) {
			p.add("ServiceMonitor selector does not select Service %s", fullname)
		}
	case sm != nil:
		p.add("ServiceMonitor rendered without serviceMonitor.enabled")
	}
	return p
}

// admitsPort reports whether an ingress rule of np names port.
func admitsPort(np obj, port any) bool {
	return slices.ContainsFunc(list(np, "spec", "ingress"), func(r any) bool { return ruleAdmits(r, port) })
}

// ruleAdmits reports whether a NetworkPolicy rule names port.
func ruleAdmits(rule, port any) bool {
	return slices.ContainsFunc(list(rule, "ports"), func(pp any) bool { return get(pp, "port") == port })
}

type sidecarWant struct {
	envWant
	agent string
	port  int
	// health.port; 0 = the default
	healthPort int
	agents     []string
	// deployment holding the agent and its sidecar
	deployment string
	// whether this release renders the gateway's ConfigMaps too (the chart
	// itself); an application chart renders them through the subchart
	configMaps bool
}

// checkSidecar asserts the sidecar-mode manifests.
func checkSidecar(docs []obj, w sidecarWant) problems {
	var p problems
	healthPort := orDefaultHealth(w.healthPort)
	if w.configMaps {
		gw := checkConfigMaps(&p, docs, w.agents)
		// Loopback like the main port: the sidecar publishes nothing.
		if got, want := str(gw, "health_listen"), fmt.Sprintf("127.0.0.1:%d", healthPort); gw != nil && got != want {
			p.add("gateway.yaml health_listen = %q, want %q", got, want)
		}
	}
	for _, k := range []string{"StatefulSet", "HorizontalPodAutoscaler", "PodDisruptionBudget", "ServiceMonitor", "NetworkPolicy"} {
		if objs := ofKind(docs, k); len(objs) > 0 {
			p.add("sidecar mode renders %s %v", k, names(objs))
		}
	}

	dep := find(docs, "Deployment", w.deployment)
	if dep == nil {
		p.add("no Deployment %s (kinds: %v)", w.deployment, kinds(docs))
		return p
	}
	pod, _ := get(dep, "spec", "template", "spec").(obj)
	podLabels := get(dep, "spec", "template", "metadata", "labels")
	c := byName(list(pod, "containers"), "gateway")
	if c == nil {
		p.add("Deployment %s: no gateway container", w.deployment)
		return p
	}
	what := "Deployment " + w.deployment + " container gateway"

	args := list(c, "args")
	argAfter := func(flag string) (string, bool) {
		i := slices.Index(args, any(flag))
		if i < 0 || i+1 >= len(args) {
			return "", false
		}
		s, ok := args[i+1].(string)
		return s, ok
	}
	if a, ok := argAfter("--sidecar-agent"); !ok {
		p.add("%s: args %v without --sidecar-agent", what, args)
	} else if a != w.agent {
		p.add("%s: --sidecar-agent %q, want %q", what, a, w.agent)
	}
	listen, ok := argAfter("--listen")
	if !ok {
		p.add("%s: args %v without --listen", what, args)
	} else if host, port, err := net.SplitHostPort(listen); err != nil {
		p.add("%s: --listen %q: %v", what, listen, err)
	} else {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			p.add("%s: --listen %q is not a loopback address", what, listen)
		}
		if port != strconv.Itoa(w.port) {
			p.add("%s: --listen port %s, want %d", what, port, w.port)
		}
	}
	// Nothing published: no container port and no Service on the sidecar port.
	if ports := list(c, "ports"); len(ports) > 0 {
		p.add("%s: exposes container ports %v", what, ports)
	}
	for _, s := range ofKind(docs, "Service") {
		selects := subset(get(s, "spec", "selector"), podLabels)
		for _, sp := range list(s, "spec", "ports") {
			port, target := get(sp, "port"), get(sp, "targetPort")
			if selects || port == w.port || target == w.port || target == strconv.Itoa(w.port) {
				p.add("Service %s exposes the sidecar pod or port (port %v targetPort %v)", name(s), port, target)
			}
		}
	}

	// The agent reaches the gateway on loopback.
	wantURL := fmt.Sprintf("http://127.0.0.1:%d/v1", w.port)
	found := false
	for _, ac := range list(pod, "containers") {
		if str(ac, "name") == "gateway" {
			continue
		}
		if e := byName(list(ac, "env"), "OPENAI_BASE_URL"); e != nil {
			found = true
			if got := str(e, "value"); got != wantURL {
				p.add("Deployment %s container %s: OPENAI_BASE_URL %q, want %q", w.deployment, str(ac, "name"), got, wantURL)
			}
			// Anthropic's SDKs add /v1 to their base URL themselves.
			if got, want := str(byName(list(ac, "env"), "ANTHROPIC_BASE_URL"), "value"), strings.TrimSuffix(wantURL, "/v1"); got != want {
				p.add("Deployment %s container %s: ANTHROPIC_BASE_URL %q, want %q", w.deployment, str(ac, "name"), got, want)
			}
		}
	}
	if !found {
		p.add("Deployment %s: no agent container with OPENAI_BASE_URL", w.deployment)
	}

	// Exec probes on loopback (the kubelet cannot reach 127.0.0.1 of the
	// pod), to the health port: plain HTTP whatever the main port does.
	for _, pr := range []struct{ field, path string }{
		{"startupProbe", "/healthz"},
		{"livenessProbe", "/healthz"},
		{"readinessProbe", "/readyz"},
	} {
		cmd := list(c, pr.field, "exec", "command")
		want := fmt.Sprintf("http://127.0.0.1:%d%s", healthPort, pr.path)
		if len(cmd) == 0 || cmd[len(cmd)-1] != want {
			p.add("%s: %s exec command %v, want it to end with %s", what, pr.field, cmd, want)
		}
	}

	checkPodNameEnv(&p, what, c)
	checkEnvSources(&p, what, docs, c, w.envWant)
	checkContainerSecurity(&p, what, c)
	if m := byName(list(c, "volumeMounts"), "gateway-audit"); str(m, "mountPath") != "/data/audit" {
		p.add("%s: audit volume not mounted at /data/audit (%v)", what, m)
	}
	checkVolumes(&p, what, docs, pod, c, nil, nil)
	if g, ok := get(pod, "terminationGracePeriodSeconds").(int); !ok || g <= 30 {
		p.add("Deployment %s: terminationGracePeriodSeconds %v, want above the 30s shutdown_timeout", w.deployment, get(pod, "terminationGracePeriodSeconds"))
	}
	return p
}

func kinds(docs []obj) []string {
	var out []string
	for _, d := range docs {
		out = append(out, kind(d)+"/"+name(d))
	}
	return out
}

func names(docs []obj) []string {
	var out []string
	for _, d := range docs {
		out = append(out, name(d))
	}
	return out
}

var defaultAgents = []string{"claude-3", "copilot-2", "gemini-pro"}

var centralCases = []struct {
	name   string
	values []string
	set    []string
	want   centralWant
}{
	{
		name: "chart defaults",
		want: centralWant{persistence: true, agents: defaultAgents},
	},
	{
		name:   "ci/default-values",
		values: []string{"ci/default-values.yaml"},
		want:   centralWant{persistence: true, agents: defaultAgents},
	},
	{
		name:   "ci/redis-hpa-servicemonitor-values",
		values: []string{"ci/redis-hpa-servicemonitor-values.yaml"},
		want: centralWant{
			envWant: envWant{
				redisSecret: fullname + "-redis", redisKey: "redis-url",
				redisURL:       "redis://gateway-redis-master.redis.svc:6379/0",
				upstreamSecret: fullname + "-env", upstreamKey: "OPENAI_API_KEY",
			},
			persistence: true, hpa: true, serviceMonitor: true,
			agents: []string{"my-agent"},
		},
	},
	{
		name:   "ci/existing-secrets-values",
		values: []string{"ci/existing-secrets-values.yaml"},
		want: centralWant{
			envWant: envWant{
				redisSecret: "gateway-redis", redisKey: "url",
				upstreamSecret: "gateway-upstream-keys",
			},
			persistence: false, agents: defaultAgents,
			signingSecret: "gateway-audit-key",
		},
	},
	{
		name: "longer shutdown_timeout",
		set:  []string{"config.gateway.shutdown_timeout=2m", "terminationGracePeriodSeconds=150"},
		want: centralWant{persistence: true, agents: defaultAgents},
	},
	{
		// The kubelet has no client certificate: the probes stay on the
		// plain-HTTP health port.
		name: "mTLS on the main port",
		set: []string{"config.gateway.tls.cert_file=/etc/tls/tls.crt", "config.gateway.tls.key_file=/etc/tls/tls.key",
			"config.gateway.tls.client_ca_file=/etc/tls/ca.crt"},
		want: centralWant{persistence: true, agents: defaultAgents},
	},
	{
		name: "health.port 9091",
		set:  []string{"health.port=9091"},
		want: centralWant{persistence: true, agents: defaultAgents, healthPort: 9091},
	},
}

func TestCentral(t *testing.T) {
	helmBin(t)
	for _, tc := range centralCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkCentral(render(t, ".", tc.values, tc.set), tc.want).report(t)
		})
	}
}

func TestSidecar(t *testing.T) {
	helmBin(t)
	want := sidecarWant{
		agent: "copilot-2", port: 8080, agents: []string{"copilot-2"},
		deployment: fullname + "-example-agent", configMaps: true,
	}
	port9 := want
	port9.port = 9090
	health9 := want
	health9.healthPort = 9191
	withRedis := want
	withRedis.envWant = envWant{redisSecret: fullname + "-redis", redisKey: "redis-url", redisURL: "redis://r:6379/0"}
	for _, tc := range []struct {
		name   string
		values []string
		set    []string
		want   sidecarWant
	}{
		{"ci/sidecar-values", []string{"ci/sidecar-values.yaml"}, nil, want},
		{"examples/sidecar-values", []string{"examples/sidecar-values.yaml"}, nil, want},
		{"sidecar port 9090", []string{"ci/sidecar-values.yaml"}, []string{"sidecar.port=9090"}, port9},
		{"sidecar health port 9191", []string{"ci/sidecar-values.yaml"}, []string{"health.port=9191"}, health9},
		{"sidecar with redis", []string{"ci/sidecar-values.yaml"}, []string{"redis.url=redis://r:6379/0"}, withRedis},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			docs := render(t, ".", tc.values, tc.set)
			checkSidecar(docs, tc.want).report(t)
			if svcs := ofKind(docs, "Service"); len(svcs) > 0 {
				t.Errorf("sidecar mode renders Services %v", names(svcs))
			}
		})
	}
}

// TestSidecarFromApplicationChart renders examples/agent-deployment.yaml in an
// application chart that has this chart as its "gateway" subchart, with
// examples/sidecar-values.yaml as the subchart's values.
func TestSidecarFromApplicationChart(t *testing.T) {
	helmBin(t)
	app := t.TempDir()
	if err := copyChart(".", filepath.Join(app, "charts", "gateway")); err != nil {
		t.Fatal(err)
	}
	chartYAML := "apiVersion: v2\nname: agent-app\nversion: 0.1.0\n"
	if err := os.WriteFile(filepath.Join(app, "Chart.yaml"), []byte(chartYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	tpl, err := os.ReadFile("examples/agent-deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(app, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "templates", "agent.yaml"), tpl, 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("examples/sidecar-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var gwValues obj
	if err := yaml.Unmarshal(raw, &gwValues); err != nil {
		t.Fatal(err)
	}
	gwValues["sidecarExample"] = obj{"enabled": false} // only the application's Deployment
	vals, err := yaml.Marshal(obj{"gateway": gwValues})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "values.yaml"), vals, 0o644); err != nil {
		t.Fatal(err)
	}

	docs := render(t, app, nil, nil)
	checkSidecar(docs, sidecarWant{
		agent: "copilot-2", port: 8080, agents: []string{"copilot-2"},
		deployment: release + "-agent", configMaps: true,
	}).report(t)
	if d := find(docs, "Deployment", fullname+"-example-agent"); d != nil {
		t.Errorf("the subchart's example Deployment is rendered with sidecarExample.enabled false")
	}
}

// copyChart copies the chart directory src to dst, without Go files.
func copyChart(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// TestLint runs `helm lint --strict` with every values file of ci/ and the examples.
func TestLint(t *testing.T) {
	helmBin(t)
	files, err := filepath.Glob("ci/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("ci/*.yaml: %v, want at least the 4 values files", files)
	}
	files = append(files, "examples/sidecar-values.yaml")
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			if out, err := runHelm(t, "lint", "--strict", ".", "-f", f); err != nil {
				t.Error(err)
			} else if !strings.Contains(out, "0 chart(s) failed") {
				t.Errorf("helm lint --strict -f %s:\n%s", f, out)
			}
		})
	}
}

// TestChecksCatchBrokenCharts makes sure the checkers fail: renders with values
// that break an assertion, and documents mutated in memory.
func TestChecksCatchBrokenCharts(t *testing.T) {
	helmBin(t)
	base := centralWant{persistence: true, agents: defaultAgents}
	for _, tc := range []struct {
		name string
		set  []string
		want centralWant
		msg  string
	}{
		{"writable root filesystem", []string{"securityContext.readOnlyRootFilesystem=false"}, base, "readOnlyRootFilesystem"},
		{"root allowed", []string{"securityContext.runAsNonRoot=false"}, base, "runAsNonRoot"},
		{"capabilities kept", []string{"securityContext.capabilities.drop={NET_RAW}"}, base, "capabilities.drop"},
		{"no persistence", []string{"persistence.enabled=false"}, base, "volumeClaimTemplate audit"},
		{"no PDB", []string{"podDisruptionBudget.enabled=false"}, base, "PodDisruptionBudget"},
		{"HPA expected", nil, centralWant{persistence: true, hpa: true, agents: defaultAgents}, "HorizontalPodAutoscaler"},
		{"ServiceMonitor expected", nil, centralWant{persistence: true, serviceMonitor: true, agents: defaultAgents}, "ServiceMonitor"},
		{"Redis expected", nil, centralWant{envWant: envWant{redisSecret: fullname + "-redis", redisKey: "redis-url"}, persistence: true, agents: defaultAgents}, "REDIS_URL"},
		{"upstream Secret expected", nil, centralWant{envWant: envWant{upstreamSecret: fullname + "-env", upstreamKey: "OPENAI_API_KEY"}, persistence: true, agents: defaultAgents}, "upstream key"},
		// The template's own guard only understands "<n>s" and "<n>m".
		{"grace period below a compound shutdown_timeout", []string{"config.gateway.shutdown_timeout=1m30s"}, base, "terminationGracePeriodSeconds"},
		{"policies given inline leave the image's", []string{"policies.x\\.rego=package x"}, base, "policy dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := checkCentral(render(t, ".", nil, tc.set), tc.want)
			t.Logf("reported: %q", got)
			if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, tc.msg) }) {
				t.Errorf("checkCentral reported %q, want a problem mentioning %q", got, tc.msg)
			}
		})
	}

	t.Run("sidecar listening on all interfaces behind a Service", func(t *testing.T) {
		t.Parallel()
		docs := render(t, ".", []string{"ci/sidecar-values.yaml"}, nil)
		dep := find(docs, "Deployment", fullname+"-example-agent")
		c := byName(list(dep, "spec", "template", "spec", "containers"), "gateway")
		args := list(c, "args")
		i := slices.Index(args, any("--listen"))
		if i < 0 {
			t.Fatalf("no --listen in %v", args)
		}
		args[i+1] = "0.0.0.0:8080"
		c["args"] = slices.Delete(args, slices.Index(args, any("--sidecar-agent")), slices.Index(args, any("--sidecar-agent"))+2)
		docs = append(docs, obj{
			"apiVersion": "v1", "kind": "Service", "metadata": obj{"name": "leak"},
			"spec": obj{"ports": []any{obj{"port": 80, "targetPort": 8080}}},
		})
		got := checkSidecar(docs, sidecarWant{agent: "copilot-2", port: 8080, agents: []string{"copilot-2"}, deployment: fullname + "-example-agent", configMaps: true})
		for _, msg := range []string{"not a loopback address", "without --sidecar-agent", "Service leak exposes"} {
			if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, msg) }) {
				t.Errorf("checkSidecar reported %q, want a problem mentioning %q", got, msg)
			}
		}
	})

	t.Run("sidecar probes on the main port, health_listen on all interfaces", func(t *testing.T) {
		t.Parallel()
		docs := render(t, ".", []string{"ci/sidecar-values.yaml"}, nil)
		c := byName(list(find(docs, "Deployment", fullname+"-example-agent"), "spec", "template", "spec", "containers"), "gateway")
		cmd := list(c, "readinessProbe", "exec", "command")
		cmd[len(cmd)-1] = "http://127.0.0.1:8080/readyz"
		cm := find(docs, "ConfigMap", fullname+"-config")
		data := cm["data"].(obj)
		data["gateway.yaml"] = strings.Replace(data["gateway.yaml"].(string), "health_listen: 127.0.0.1:8081", "health_listen: :8081", 1)
		got := checkSidecar(docs, sidecarWant{agent: "copilot-2", port: 8080, agents: []string{"copilot-2"}, deployment: fullname + "-example-agent", configMaps: true})
		for _, msg := range []string{"readinessProbe exec command", "health_listen"} {
			if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, msg) }) {
				t.Errorf("checkSidecar reported %q, want a problem mentioning %q", got, msg)
			}
		}
	})

	// The health port, broken in the rendered documents one way at a time.
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, docs []obj) []obj
		msg    string
	}{
		{"probe on the main port", func(t *testing.T, docs []obj) []obj {
			c := byName(list(find(docs, "StatefulSet", fullname), "spec", "template", "spec", "containers"), "gateway")
			get(c, "livenessProbe", "httpGet").(obj)["port"] = "http"
			return docs
		}, "livenessProbe.httpGet.port"},
		{"HTTPS probe", func(t *testing.T, docs []obj) []obj {
			c := byName(list(find(docs, "StatefulSet", fullname), "spec", "template", "spec", "containers"), "gateway")
			get(c, "readinessProbe", "httpGet").(obj)["scheme"] = "HTTPS"
			return docs
		}, "readinessProbe.httpGet.scheme"},
		{"gateway.yaml without health_listen", func(t *testing.T, docs []obj) []obj {
			data := find(docs, "ConfigMap", fullname+"-config")["data"].(obj)
			gw := data["gateway.yaml"].(string)
			if !strings.Contains(gw, "health_listen: :8081\n") {
				t.Fatalf("no health_listen line in gateway.yaml:\n%s", gw)
			}
			data["gateway.yaml"] = strings.Replace(gw, "health_listen: :8081\n", "", 1)
			return docs
		}, "health_listen"},
		{"NetworkPolicy without the health rule", func(t *testing.T, docs []obj) []obj {
			spec := find(docs, "NetworkPolicy", fullname)["spec"].(obj)
			spec["ingress"] = slices.DeleteFunc(list(spec, "ingress"), func(r any) bool { return ruleAdmits(r, "health") })
			return docs
		}, "admits the health port"},
		{"Service publishing the health port", func(t *testing.T, docs []obj) []obj {
			spec := find(docs, "Service", fullname)["spec"].(obj)
			spec["ports"] = append(list(spec, "ports"), obj{"name": "health", "port": 8081, "targetPort": "health"})
			return docs
		}, "exposes the health port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := checkCentral(tc.mutate(t, render(t, ".", nil, nil)), base)
			if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, tc.msg) }) {
				t.Errorf("checkCentral reported %q, want a problem mentioning %q", got, tc.msg)
			}
		})
	}

	// The template refuses a health port that is the main port.
	for _, set := range []string{"health.port=8080", "mode=sidecar,sidecar.port=8081"} {
		if _, err := runHelm(t, "template", release, ".", "--set", set); err == nil || !strings.Contains(err.Error(), "must differ") {
			t.Errorf("--set %s: %v, want the template to fail with \"must differ\"", set, err)
		}
	}
}

// TestChartFilesMatchRepository: the chart carries copies of the
// repository's RBAC model, registry, schemas and catalogue (Helm
// reads nothing outside the chart); a copy that drifted would ship other
// rules than the ones tested.
func TestChartFilesMatchRepository(t *testing.T) {
	pairs := map[string]string{
		"files/rbac_model.conf": "../../config/rbac_model.conf",
		"files/registry.yaml":   "../../config/registry.yaml",
		"files/schemas":         "../../config/schemas",
		"files/specs":           "../../config/specs",
	}
	for copyPath, source := range pairs {
		want, got := readTree(t, source), readTree(t, copyPath)
		for rel, content := range want {
			if got[rel] != content {
				t.Errorf("%s/%s differs from %s/%s: copy it into the chart", copyPath, rel, source, rel)
			}
		}
		for rel := range got {
			if _, ok := want[rel]; !ok {
				t.Errorf("%s/%s has no source in %s", copyPath, rel, source)
			}
		}
	}
}

// readTree maps each file below root (or root itself, a file) to its
// content; Go files are the repository's, not policies.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		b, err := os.ReadFile(path)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNetworkPolicyAgentEgress: with agents' selectors the gateway may
// reach their message endpoints; without, no egress rule names agent ports.
func TestNetworkPolicyAgentEgress(t *testing.T) {
	helmBin(t)
	docs := render(t, ".", nil, []string{"networkPolicy.egress.agents.podSelectors[0].app=agents", "networkPolicy.egress.agents.ports[0]=9443"})
	np := find(docs, "NetworkPolicy", fullname)
	if np == nil {
		t.Fatal("no NetworkPolicy")
	}
	found := false
	for _, r := range get(np, "spec", "egress").([]any) {
		rule := r.(obj)
		to, _ := rule["to"].([]any)
		for _, peer := range to {
			if get(peer.(obj), "podSelector", "matchLabels", "app") == "agents" {
				ports := rule["ports"].([]any)
				found = len(ports) == 1 && fmt.Sprint(get(ports[0].(obj), "port")) == "9443"
			}
		}
	}
	if !found {
		t.Errorf("no egress rule to the agents' pods on 9443: %v", get(np, "spec", "egress"))
	}
	for _, r := range get(find(render(t, ".", nil, nil), "NetworkPolicy", fullname), "spec", "egress").([]any) {
		for _, p := range r.(obj)["ports"].([]any) {
			if fmt.Sprint(get(p.(obj), "port")) == "9000" {
				t.Errorf("agent egress rendered without selectors: %v", r)
			}
		}
	}
}

// TestChartWorkflows: config.workflows renders workflows.yaml into the
// config ConfigMap; without it there is no such file (the gateway then runs
// no workflow).
func TestChartWorkflows(t *testing.T) {
	helmBin(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	err := os.WriteFile(values, []byte(`config:
  workflows:
    triage:
      description: Triage a ticket
      callers: [claude-3]
      start: classify
      nodes:
        classify:
          agent: claude-3
          model: mock-1
          input: "Classify {{input.ticket}}"
      edges:
        - {from: classify, to: end, when: 'response.status == "success"'}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	var p problems
	cfg := find(render(t, ".", []string{values}, nil), "ConfigMap", fullname+"-config")
	wf := configMapYAML(&p, cfg, "workflows.yaml")
	p.report(t)
	if got := str(wf, "workflows", "triage", "start"); got != "classify" {
		t.Errorf("workflows.yaml: triage.start = %q, want classify", got)
	}
	if got := str(wf, "workflows", "triage", "nodes", "classify", "input"); got != "Classify {{input.ticket}}" {
		t.Errorf("the template must reach the file as written, got %q", got)
	}
	def := find(render(t, ".", nil, nil), "ConfigMap", fullname+"-config")
	if _, ok := get(def, "data", "workflows.yaml").(string); ok {
		t.Error("the defaults render a workflows.yaml")
	}
}

// fakeT records how noHelm ended a test.
type fakeT struct{ fatal, skip string }

func (f *fakeT) Helper()                   {}
func (f *fakeT) Fatalf(s string, a ...any) { f.fatal = fmt.Sprintf(s, a...) }
func (f *fakeT) Skip(a ...any)             { f.skip = fmt.Sprint(a...) }

// TestNoHelm: without helm the chart tests fail where helm is required
// (CI, GATEWAY_REQUIRE_HELM=1) and skip elsewhere, with a notice on stderr.
func TestNoHelm(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		wantFail bool
	}{
		{map[string]string{}, false},
		{map[string]string{"CI": "true"}, true},
		{map[string]string{"CI": "1"}, true},
		{map[string]string{"CI": "false"}, false},
		{map[string]string{"CI": "0"}, false},
		{map[string]string{"GATEWAY_REQUIRE_HELM": "1"}, true},
		{map[string]string{"GATEWAY_REQUIRE_HELM": "0"}, false},
	} {
		var f fakeT
		var stderr strings.Builder
		skipNotice = sync.Once{}
		noHelm(&f, func(k string) string { return tc.env[k] }, &stderr)
		switch {
		case tc.wantFail && (f.fatal == "" || f.skip != ""):
			t.Errorf("env %v: fatal %q skip %q, want a failure", tc.env, f.fatal, f.skip)
		case tc.wantFail && !strings.Contains(f.fatal, "helm not found"):
			t.Errorf("env %v: failure %q does not say helm is missing", tc.env, f.fatal)
		case !tc.wantFail && (f.skip == "" || f.fatal != ""):
			t.Errorf("env %v: fatal %q skip %q, want a skip", tc.env, f.fatal, f.skip)
		case !tc.wantFail && !strings.Contains(stderr.String(), "SKIPPING CHART TESTS"):
			t.Errorf("env %v: skipped without a notice on stderr (%q)", tc.env, stderr.String())
		}
	}
	skipNotice = sync.Once{}
}

// TestChartPolicySources: the chart holds no copy of the policies. By
// default the gateway serves the image's /app/rego; policies (inline, a
// ConfigMap the chart renders) or policyVolume (any volume, e.g. a
// ConfigMap of your own) are mounted over /etc/gateway/rego; a signed OPA
// bundle (config.gateway.policy.bundle) replaces the directory, so no dir
// is set and nothing is mounted; two sources at once fail the render.
func TestChartPolicySources(t *testing.T) {
	t.Parallel()
	type want struct {
		dir       string // gateway.yaml policy.dir ("" = unset)
		mounted   bool   // a "policies" volumeMount at /etc/gateway/rego
		configMap string // the policies volume's ConfigMap ("" = none)
		rendered  bool   // the chart renders the -policies ConfigMap
	}
	for _, tc := range []struct {
		name string
		set  []string
		want want
	}{
		{"the image's", nil, want{dir: "/app/rego"}},
		{"inline", []string{"policies.gateway/chat/chat\\.rego=package gateway.chat"}, want{dir: "/etc/gateway/rego", mounted: true, configMap: fullname + "-policies", rendered: true}},
		{"a volume of your own", []string{"policyVolume.configMap.name=acme-policies"}, want{dir: "/etc/gateway/rego", mounted: true, configMap: "acme-policies"}},
		{"a signed bundle", []string{"config.gateway.policy.bundle.oci=ghcr.io/acme/gateway-policy:1", "config.gateway.policy.bundle.public_key_file=/etc/bundle-key/key.pem"}, want{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			docs := render(t, ".", nil, tc.set)
			var p problems
			gw := configMapYAML(&p, find(docs, "ConfigMap", fullname+"-config"), "gateway.yaml")
			if got := str(gw, "policy", "dir"); got != tc.want.dir {
				p.add("policy.dir = %q, want %q", got, tc.want.dir)
			}
			pod := get(find(docs, "StatefulSet", fullname), "spec", "template", "spec")
			m := byName(list(byName(list(pod, "containers"), "gateway"), "volumeMounts"), "policies")
			if (m != nil) != tc.want.mounted || m != nil && str(m, "mountPath") != "/etc/gateway/rego" {
				p.add("policies mount = %v, want mounted %v at /etc/gateway/rego", m, tc.want.mounted)
			}
			if got := str(byName(list(pod, "volumes"), "policies"), "configMap", "name"); got != tc.want.configMap {
				p.add("policies volume's ConfigMap = %q, want %q", got, tc.want.configMap)
			}
			if got := find(docs, "ConfigMap", fullname+"-policies") != nil; got != tc.want.rendered {
				p.add("-policies ConfigMap rendered = %v, want %v", got, tc.want.rendered)
			}
			if tc.want.dir == "" && str(gw, "policy", "bundle", "oci") == "" {
				p.add("gateway.yaml lost policy.bundle: %v", get(gw, "policy"))
			}
			for _, s := range p {
				t.Error(s)
			}
		})
	}
	_, err := runHelm(t, "template", release, ".", "--set", "policyVolume.configMap.name=x", "--set", "config.gateway.policy.bundle.url=https://b.example.com/b.tar.gz")
	if err == nil || !strings.Contains(err.Error(), "leave policies and policyVolume empty") {
		t.Errorf("a volume and a bundle: %v, want the render to fail", err)
	}
}

// A state.redis block (here a Sentinel set) makes the backend redis without
// redis.url, and the chart leaves it as given: no redis_url beside it.
func TestStateRedisBlock(t *testing.T) {
	helmBin(t)
	docs := render(t, ".", nil, []string{"config.gateway.state.redis.sentinel.master=gw",
		"config.gateway.state.redis.sentinel.addrs[0]=sentinel-0:26379", "config.gateway.state.redis.password=${REDIS_PASSWORD}"})
	var p problems
	gw := configMapYAML(&p, find(docs, "ConfigMap", fullname+"-config"), "gateway.yaml")
	p.report(t)
	if got := str(gw, "state", "backend"); got != "redis" {
		t.Errorf("state.backend %q, want redis", got)
	}
	if _, ok := get(gw, "state").(obj)["redis_url"]; ok {
		t.Errorf("state.redis_url rendered beside state.redis: %v", get(gw, "state"))
	}
	if got := str(gw, "state", "redis", "sentinel", "master"); got != "gw" {
		t.Errorf("state.redis.sentinel.master %q", got)
	}
}
