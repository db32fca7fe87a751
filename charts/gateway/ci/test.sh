#!/usr/bin/env sh
# Lint and render the chart with each values file of ci/ (and the examples),
# then check what the templates cannot: the example values match, the built-in
# catalogue names match files/specs/, and the rendered gateway config loads
# (`gateway config check`, when Go is available).
# Usage: charts/gateway/ci/test.sh        (from anywhere; needs helm or Go)
# HELM overrides the helm command (default: helm on PATH, else
# helm.sh/helm/v3/cmd/helm@$HELM_VERSION built with Go, v3.22.0 as in CI).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
chart=$(dirname "$here")
repo=$(cd "$chart/../.." && pwd)
HELM_VERSION=${HELM_VERSION:-v3.22.0}
if [ -z "${HELM:-}" ]; then
	if command -v helm >/dev/null 2>&1; then
		HELM=helm
	else
		dir=${TMPDIR:-/tmp}/gateway-chart-helm-$HELM_VERSION
		bin=$dir/helm
		[ -x "$bin" ] || (cd "${TMPDIR:-/tmp}" && GOBIN=$dir GOFLAGS= go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
		HELM=$bin
	fi
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0

# The sidecar example and its CI copy must not drift apart.
if ! tail -n +2 "$here/sidecar-values.yaml" | cmp -s - "$chart/examples/sidecar-values.yaml"; then
	echo "FAIL ci/sidecar-values.yaml differs from examples/sidecar-values.yaml (after its first line)"; fail=1
fi
# gateway.defaultCatalogueNames (used by the sidecar from other charts) must list files/specs/.
want=$(cd "$chart/files/specs" && ls *.md | sort | tr '\n' ' ')
have=$(sed -n '/define "gateway.defaultCatalogueNames"/,/end/p' "$chart/templates/_helpers.tpl" | sed -n 's/^- //p' | sort | tr '\n' ' ')
if [ "$want" != "$have" ]; then
	echo "FAIL gateway.defaultCatalogueNames ($have) != files/specs ($want)"; fail=1
fi

gw=""
if command -v go >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1 && python3 -c 'import yaml' 2>/dev/null; then
	gw="$out/gateway"
	(cd "$repo" && go build -o "$gw" ./cmd/gateway) || gw=""
fi

for values in "$here"/*.yaml; do
	name=$(basename "$values" .yaml)
	if ! "$HELM" lint --strict "$chart" -f "$values" >"$out/$name.lint" 2>&1; then
		echo "FAIL lint $name"; cat "$out/$name.lint"; fail=1; continue
	fi
	if ! "$HELM" template gw "$chart" -f "$values" >"$out/$name.yaml" 2>"$out/$name.err"; then
		echo "FAIL template $name"; cat "$out/$name.err"; fail=1; continue
	fi
	if [ -n "$gw" ]; then
		# Lay the ConfigMaps out as the kubelet does and load them with the gateway.
		root="$out/$name.root"
		if ! python3 - "$out/$name.yaml" "$root" "$repo/rego" <<'PY'
import os, sys, yaml
manifest, root, image_rego = sys.argv[1], sys.argv[2], sys.argv[3]
mounts = {"-config": "etc/gateway/config", "-schemas": "etc/gateway/schemas",
          "-policies": "etc/gateway/rego", "-catalogue": "etc/gateway/catalogue"}
for doc in yaml.safe_load_all(open(manifest)):
    if not doc or doc.get("kind") != "ConfigMap":
        continue
    for suf, sub in mounts.items():
        if not doc["metadata"]["name"].endswith(suf):
            continue
        d = os.path.join(root, sub)
        ts = os.path.join(d, "..2000_01_01_00_00_00.000000001")
        os.makedirs(ts)
        os.symlink(os.path.basename(ts), os.path.join(d, "..data"))
        for k, v in (doc.get("data") or {}).items():
            if suf == "-config":
                # /app/rego is the image's policies: the repository's rego/ here.
                v = v.replace("/etc/gateway", root + "/etc/gateway").replace("/data/audit", root + "/data/audit").replace("/app/rego", image_rego)
            if suf == "-catalogue":  # subPath mounts: plain files
                open(os.path.join(d, k), "w").write(v)
                continue
            open(os.path.join(ts, k), "w").write(v)
            os.symlink(os.path.join("..data", k), os.path.join(d, k))
    if doc["metadata"]["name"].endswith("-catalogue"):
        import shutil; shutil.rmtree(os.path.join(root, "etc/gateway/catalogue", "..2000_01_01_00_00_00.000000001"))
        os.remove(os.path.join(root, "etc/gateway/catalogue", "..data"))
PY
		then
			echo "FAIL layout $name"; fail=1; continue
		fi
		# A signing key from a Secret (audit.signingKeySecret): make one where it is mounted.
		if grep -q 'signing_key_file: .*/etc/gateway/audit-key/' "$root/etc/gateway/config/gateway.yaml"; then
			key=$(sed -n 's/.*signing_key_file: *//p' "$root/etc/gateway/config/gateway.yaml" | head -n 1)
			mkdir -p "$(dirname "$key")" && "$gw" audit keygen --out "${key%.key}" >/dev/null
		fi
		if ! REDIS_URL=redis://127.0.0.1:6379/0 "$gw" config check --config "$root/etc/gateway/config" >"$out/$name.check" 2>&1; then
			echo "FAIL config check $name"; cat "$out/$name.check"; fail=1; continue
		fi
	fi
	echo "ok   $name: $(grep -c '^kind:' "$out/$name.yaml") objects${gw:+, config check passed}"
done
exit $fail
