package chart_test

// The configuration the chart renders must start the gateway: a default
// install that crash-loops is a bug of the chart (one was: the demo agent
// allow-listed a model no upstream served). Each case lays the rendered
// ConfigMaps and Secrets out as the kubelet mounts them into the gateway
// container, gives it the environment the pod would have, loads the
// directory its --config names with config.Load, and checks that what the
// gateway writes lands on a writable volume (the root filesystem is
// read-only, ConfigMaps and Secrets always are).

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/config"
)

// mount is one volumeMount of the gateway container, as laid out under root.
type mount struct {
	path     string // mountPath in the container
	volume   string
	writable bool // emptyDir or claim, not mounted readOnly
	external bool // a Secret the chart does not render (its content is unknown)
}

// pod is the rendered pod that runs the gateway, laid out on disk.
type pod struct {
	name   string
	root   string // stands for the container's "/"
	mounts []mount
	env    map[string]string
	config string // the --config directory, under root
}

// gatewayPod finds the pod template running the gateway: the StatefulSet
// (central), else a Deployment with a gateway container (sidecar).
func gatewayPod(docs []obj) (podName string, spec, container obj, claims []any) {
	if sts := find(docs, "StatefulSet", fullname); sts != nil {
		spec, _ = get(sts, "spec", "template", "spec").(obj)
		return fullname + "-0", spec, byName(list(spec, "containers"), "gateway"), list(sts, "spec", "volumeClaimTemplates")
	}
	for _, d := range ofKind(docs, "Deployment") {
		spec, _ = get(d, "spec", "template", "spec").(obj)
		if c := byName(list(spec, "containers"), "gateway"); c != nil {
			return name(d) + "-7c9d8b6f5d-x2x7q", spec, c, nil
		}
	}
	return "", nil, nil, nil
}

// pathToken is an absolute path in a config file: after a space, a quote,
// "[" or ",", up to the next delimiter (YAML scalars and flow lists).
var pathToken = regexp.MustCompile(`(^|[\s"'\[,])(/[^\s"',\]]*)`)

// layOut writes the gateway container's volumes under a new root: the
// ConfigMaps and Secrets it mounts (their absolute paths into the mounts
// rewritten to root), empty directories for the rest. An external Secret's
// keys are unknown: every path the config names inside it gets a
// placeholder file, as the operator's Secret is assumed to hold it.
func layOut(t *testing.T, docs []obj) *pod {
	t.Helper()
	podName, spec, c, claims := gatewayPod(docs)
	if c == nil {
		t.Fatalf("no pod with a gateway container (kinds: %v)", kinds(docs))
	}
	p := &pod{name: podName, root: t.TempDir()}
	vols := list(spec, "volumes")
	for _, m := range list(c, "volumeMounts") {
		mt := mount{path: str(m, "mountPath"), volume: str(m, "name")}
		v := byName(vols, mt.volume)
		switch {
		case v == nil && hasClaimTemplate(claims, mt.volume), get(v, "emptyDir") != nil, get(v, "persistentVolumeClaim") != nil:
			mt.writable = get(m, "readOnly") != true
		case get(v, "secret") != nil:
			mt.external = find(docs, "Secret", str(v, "secret", "secretName")) == nil
		}
		p.mounts = append(p.mounts, mt)
	}
	// The image's own policies, at /app/rego: the chart keeps no copy, so
	// the repository's rego/ (what the image ships) stands in for them.
	p.mounts = append(p.mounts, mount{path: "/app/rego", volume: "(the image)"})
	for rel, content := range readTree(t, "../../rego") {
		dst := filepath.Join(p.root, "app", "rego", rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Longest mount first: the one that holds a path.
	sort.Slice(p.mounts, func(i, j int) bool { return len(p.mounts[i].path) > len(p.mounts[j].path) })

	var named []string // absolute paths the files name, as in the container
	rewrite := func(s string) string {
		return pathToken.ReplaceAllStringFunc(s, func(tok string) string {
			i := strings.IndexByte(tok, '/')
			path := tok[i:]
			if p.mountOf(path) == nil {
				return tok
			}
			named = append(named, path)
			return tok[:i] + p.root + path
		})
	}
	write := func(path, content string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range list(c, "volumeMounts") {
		dst := filepath.Join(p.root, str(m, "mountPath"))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		data := volumeData(t, docs, byName(vols, str(m, "name")))
		if sub := str(m, "subPath"); sub != "" {
			content, ok := data[sub]
			if !ok {
				t.Fatalf("volumeMount %s: subPath %q is not a key of its volume", str(m, "name"), sub)
			}
			if err := os.Remove(dst); err != nil {
				t.Fatal(err)
			}
			write(dst, rewrite(content))
			continue
		}
		for k, content := range data {
			write(filepath.Join(dst, k), rewrite(content))
		}
	}
	for _, path := range named {
		if m := p.mountOf(path); m != nil && m.external {
			write(filepath.Join(p.root, path), "placeholder: the content of an external Secret\n")
		}
	}

	args := list(c, "args")
	i := slices.Index(args, any("--config"))
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("gateway container args %v: no --config", args)
	}
	p.config = filepath.Join(p.root, args[i+1].(string))
	p.env = podEnv(t, docs, c, podName)
	return p
}

// mountOf is the mount holding path (in the container), nil on the root
// filesystem.
func (p *pod) mountOf(path string) *mount {
	for i, m := range p.mounts {
		if path == m.path || strings.HasPrefix(path, strings.TrimSuffix(m.path, "/")+"/") {
			return &p.mounts[i]
		}
	}
	return nil
}

// volumeData is the files of a ConfigMap or rendered Secret volume.
func volumeData(t *testing.T, docs []obj, v obj) map[string]string {
	t.Helper()
	var src obj
	switch {
	case get(v, "configMap") != nil:
		if src = find(docs, "ConfigMap", str(v, "configMap", "name")); src == nil {
			t.Fatalf("volume %s: ConfigMap %s is not rendered", str(v, "name"), str(v, "configMap", "name"))
		}
	case get(v, "secret") != nil:
		src = find(docs, "Secret", str(v, "secret", "secretName"))
	}
	return objectData(t, src)
}

// objectData is a ConfigMap's data, or a Secret's stringData and data.
func objectData(t *testing.T, o obj) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range asObj(get(o, "data")) {
		s := fmt.Sprint(v)
		if kind(o) == "Secret" {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatalf("Secret %s: data.%s is not base64: %v", name(o), k, err)
			}
			s = string(b)
		}
		out[k] = s
	}
	for k, v := range asObj(get(o, "stringData")) {
		out[k] = fmt.Sprint(v)
	}
	return out
}

func asObj(v any) obj { m, _ := v.(obj); return m }

// podEnv is the gateway container's environment as the kubelet builds it
// (values, the downward API, rendered Secrets); a key of a Secret the chart
// does not render gets a placeholder, an envFrom of one adds nothing (its
// keys are unknown: ${VAR} of it expands empty, as for a missing key).
func podEnv(t *testing.T, docs []obj, c obj, podName string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range list(c, "envFrom") {
		for _, ref := range []struct{ kind, field string }{{"Secret", "secretRef"}, {"ConfigMap", "configMapRef"}} {
			if n := str(e, ref.field, "name"); n != "" {
				if o := find(docs, ref.kind, n); o != nil {
					for k, v := range objectData(t, o) {
						env[k] = v
					}
				}
			}
		}
	}
	for _, e := range list(c, "env") {
		n := str(e, "name")
		switch {
		case get(e, "value") != nil:
			env[n] = fmt.Sprint(get(e, "value"))
		case str(e, "valueFrom", "fieldRef", "fieldPath") == "metadata.name":
			env[n] = podName
		case str(e, "valueFrom", "fieldRef", "fieldPath") == "metadata.namespace":
			env[n] = namespace
		case get(e, "valueFrom", "resourceFieldRef") != nil:
			env[n] = "536870912"
		case get(e, "valueFrom", "secretKeyRef") != nil:
			ref := get(e, "valueFrom", "secretKeyRef")
			if o := find(docs, "Secret", str(ref, "name")); o != nil {
				env[n] = objectData(t, o)[str(ref, "key")]
			} else {
				env[n] = "from-secret-" + str(ref, "name") + "-" + str(ref, "key")
			}
		}
	}
	return env
}

// load runs config.Load on the pod's config directory with its environment.
func (p *pod) load() (*config.Config, error) {
	return config.Load(p.config, config.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := p.env[k]
		return v, ok
	}})
}

// checkWritable reports the directories the gateway writes that are not
// on a writable volume of its container.
func (p *pod) checkWritable(cfg *config.Config) problems {
	var out problems
	dirs := [][2]string{{"audit.dir", cfg.Gateway.Audit.Dir}}
	if cfg.Gateway.State.Backend != "redis" {
		dirs = append(dirs, [2]string{"state.dir", cfg.Gateway.State.Dir}) // the memory backend's spawned agents
	}
	for _, d := range dirs {
		rel, err := filepath.Rel(p.root, d[1])
		if err != nil || strings.HasPrefix(rel, "..") {
			out.add("%s %s is outside the pod's filesystem", d[0], d[1])
			continue
		}
		path := "/" + filepath.ToSlash(rel)
		switch m := p.mountOf(path); {
		case m == nil:
			out.add("%s %s is on the container's read-only root filesystem", d[0], path)
		case !m.writable:
			out.add("%s %s is on volume %s, read-only", d[0], path, m.volume)
		}
	}
	return out
}

// TestRenderedConfigLoads: with the chart's defaults and with every values
// file of ci/ and examples/, the rendered configuration loads in the
// gateway's pod and the gateway can write where it must.
func TestRenderedConfigLoads(t *testing.T) {
	helmBin(t)
	values, err := filepath.Glob("ci/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob("examples/*-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := [][]string{nil}
	for _, f := range append(values, examples...) {
		cases = append(cases, []string{f})
	}
	for _, files := range cases {
		label := "chart defaults"
		if files != nil {
			label = files[0]
		}
		t.Run(label, func(t *testing.T) {
			t.Parallel()
			p := layOut(t, render(t, ".", files, nil))
			cfg, err := p.load()
			if err != nil {
				t.Fatalf("the rendered config does not load (the gateway would not start):\n%v", err)
			}
			p.checkWritable(cfg).report(t)
			if cfg.Gateway.HealthListen == "" {
				t.Error("gateway.yaml has no health_listen: the probes have nothing to reach")
			}
		})
	}

	// The harness itself: the problems it exists for are caught.
	t.Run("catches a model no upstream serves", func(t *testing.T) {
		t.Parallel()
		p := layOut(t, render(t, ".", nil, []string{"config.agents.claude-3.models={gpt-4o-mini}"}))
		if _, err := p.load(); err == nil || !strings.Contains(err.Error(), "gpt-4o-mini") {
			t.Errorf("config.Load = %v, want a problem naming gpt-4o-mini", err)
		}
	})
	t.Run("catches state.dir on the config mount", func(t *testing.T) {
		t.Parallel()
		docs := render(t, ".", nil, nil)
		data := find(docs, "ConfigMap", fullname+"-config")["data"].(obj)
		gw := data["gateway.yaml"].(string)
		line := regexp.MustCompile(`(?m)^  dir: /data/audit/state/.*\n`)
		if !line.MatchString(gw) {
			t.Fatalf("no state.dir line in gateway.yaml:\n%s", gw)
		}
		data["gateway.yaml"] = line.ReplaceAllString(gw, "") // the gateway's default: data/state beside the config
		p := layOut(t, docs)
		cfg, err := p.load()
		if err != nil {
			t.Fatal(err)
		}
		got := p.checkWritable(cfg)
		if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "state.dir") && strings.Contains(s, "read-only") }) {
			t.Errorf("checkWritable reported %q, want state.dir on a read-only volume", got)
		}
	})
	t.Run("catches a ConfigMap mounted without its file", func(t *testing.T) {
		t.Parallel()
		docs := render(t, ".", nil, nil)
		delete(find(docs, "ConfigMap", fullname+"-config")["data"].(obj), "protocol.yaml")
		if _, err := layOut(t, docs).load(); err == nil || !strings.Contains(err.Error(), "protocol.yaml") {
			t.Errorf("config.Load = %v, want a problem naming protocol.yaml", err)
		}
	})
}
