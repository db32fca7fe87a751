{{/*
Helpers. Name helpers use only .Values and .Release (never .Chart) so that an
application chart can call the sidecar template with
(dict "Values" .Values.gateway "Release" .Release) and get the same names as
this chart's resources.
*/}}

{{- define "gateway.name" -}}
{{- default "gateway" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default "gateway" .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gateway.labels" -}}
helm.sh/chart: {{ include "gateway.chart" . }}
{{ include "gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: gateway
{{- end }}

{{- define "gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gateway.image" -}}
{{- $tag := .Values.image.tag | default "" | toString }}
{{- if not $tag }}{{- $tag = .Chart.AppVersion | default "latest" }}{{- end }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}

{{/* Names of the generated objects. */}}
{{- define "gateway.configName" -}}{{ include "gateway.fullname" . }}-config{{- end }}
{{- define "gateway.policiesName" -}}{{ include "gateway.fullname" . }}-policies{{- end }}
{{- define "gateway.schemasName" -}}{{ include "gateway.fullname" . }}-schemas{{- end }}
{{- define "gateway.catalogueName" -}}{{ include "gateway.fullname" . }}-catalogue{{- end }}
{{- define "gateway.headlessName" -}}{{ include "gateway.fullname" . }}-headless{{- end }}

{{/* Whether Redis is configured (switches state.backend). */}}
{{- define "gateway.redisEnabled" -}}
{{- if or .Values.redis.url .Values.redis.existingSecret }}true{{- end }}
{{- end }}

{{/* Flattened ConfigMap key of a policy path: "/" -> ".". */}}
{{- define "gateway.policyKey" -}}
{{- . | trimPrefix "/" | replace "/" "." }}
{{- end }}

{{/*
The policies given inline as a dict path -> content (.Values.policies).
Returned as YAML (include + fromYaml).
*/}}
{{- define "gateway.policyFiles" -}}
{{- $out := dict }}
{{- range $p, $c := .Values.policies }}{{- $_ := set $out $p $c }}{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
Where the policies come from: "mounted" (policies or policyVolume, at
/etc/gateway/rego), "bundle" (config.gateway.policy.bundle) or "image" (the
image's /app/rego). One source only.
*/}}
{{- define "gateway.policySource" -}}
{{- $policy := (.Values.config.gateway | default dict).policy | default dict }}
{{- $mounted := or .Values.policies .Values.policyVolume }}
{{- if and .Values.policies .Values.policyVolume }}
{{- fail "set policies or policyVolume, not both" }}
{{- end }}
{{- if and $mounted $policy.bundle }}
{{- fail "config.gateway.policy.bundle replaces the policy directory: leave policies and policyVolume empty" }}
{{- end }}
{{- if $policy.bundle }}bundle{{ else if $mounted }}mounted{{ else }}image{{ end }}
{{- end }}

{{/* Catalogue files as a dict name -> content. */}}
{{- define "gateway.catalogueFiles" -}}
{{- $out := dict }}
{{- if .Values.catalogue }}
{{- range $p, $c := .Values.catalogue }}{{- $_ := set $out $p $c }}{{- end }}
{{- else if .Files }}
{{- range $p, $_ := .Files.Glob "files/specs/*.md" }}
{{- $_ := set $out (base $p) ($.Files.Get $p) }}
{{- end }}
{{- else }}
{{- /* Called from another chart (sidecar): only the names matter there. */}}
{{- range include "gateway.defaultCatalogueNames" . | fromYamlArray }}
{{- $_ := set $out . "" }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/* Names of files/specs/*.md, for callers without this chart's .Files (the
sidecar template called from an application chart). ci/test.sh checks the list. */}}
{{- define "gateway.defaultCatalogueNames" -}}
- arch-001.md
- design-001.md
- docs-001.md
- req-045.md
- req-046.md
- std-001.md
{{- end }}

{{/* Schema files as a dict name -> content. */}}
{{- define "gateway.schemaFiles" -}}
{{- $out := dict }}
{{- if .Values.config.schemas }}
{{- range $p, $c := .Values.config.schemas }}{{- $_ := set $out $p $c }}{{- end }}
{{- else if .Files }}
{{- range $p, $_ := .Files.Glob "files/schemas/*.json" }}
{{- $_ := set $out (base $p) ($.Files.Get $p) }}
{{- end }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/* Port of health_listen: /healthz and /readyz in plain HTTP, for probes. */}}
{{- define "gateway.healthPort" -}}
{{- (.Values.health).port | default 8081 }}
{{- end }}

{{/*
health_listen of gateway.yaml. Central: every interface, so the kubelet's
httpGet probes reach it whatever the main port requires (TLS, mTLS).
Sidecar: loopback, like the main port, for the exec probes; nothing of the
sidecar is reachable from outside its pod.
*/}}
{{- define "gateway.healthListen" -}}
{{- $port := include "gateway.healthPort" . }}
{{- $main := ternary .Values.sidecar.port .Values.port (eq .Values.mode "sidecar") }}
{{- if eq (toString $port) (toString $main) }}
{{- fail (printf "health.port (%v) must differ from the gateway's port (%v)" $port $main) }}
{{- end }}
{{- if eq .Values.mode "sidecar" }}127.0.0.1:{{ $port }}{{ else }}:{{ $port }}{{ end }}
{{- end }}

{{/* gateway.yaml: the values' config.gateway with the chart-managed keys forced. */}}
{{- define "gateway.gatewayYaml" -}}
{{- $g := deepCopy (.Values.config.gateway | default dict) }}
{{- $_ := set $g "listen" (printf ":%v" .Values.port) }}
{{- $_ := set $g "health_listen" (include "gateway.healthListen" .) }}
{{- $policy := get $g "policy" | default dict }}
{{- $source := include "gateway.policySource" . }}
{{- if eq $source "bundle" }}
{{- $_ := unset $policy "dir" }}
{{- else }}
{{- $_ := set $policy "dir" (ternary "/etc/gateway/rego" "/app/rego" (eq $source "mounted")) }}
{{- end }}
{{- $_ := set $g "policy" $policy }}
{{- $approval := get $g "approval" | default dict }}
{{- $_ := set $approval "catalogue_dir" "../catalogue" }}
{{- $_ := set $g "approval" $approval }}
{{- $audit := get $g "audit" | default dict }}
{{- $_ := set $audit "dir" "/data/audit" }}
{{- $_ := set $audit "chain" "${POD_NAME:-}" }}
{{- $_ := set $g "audit" $audit }}
{{- $state := get $g "state" | default dict }}
{{- /* The memory backend keeps spawned agents in state.dir; its default
(data/state beside the config files) is the read-only ConfigMap mount, where
the gateway cannot start. The audit volume is the pod's only persistent,
writable one (its audit reader skips directories); one directory per pod, as
sidecars may share a claim. */}}
{{- $_ := set $state "dir" "/data/audit/state/${POD_NAME:-gateway}" }}
{{- if $state.redis }}
{{- /* A state.redis block (Sentinel, Cluster, TLS, ACL) says where Redis is itself. */}}
{{- $_ := set $state "backend" "redis" }}
{{- $_ := unset $state "redis_url" }}
{{- else if include "gateway.redisEnabled" . }}
{{- $_ := set $state "backend" "redis" }}
{{- $_ := set $state "redis_url" "${REDIS_URL}" }}
{{- else }}
{{- $_ := set $state "backend" "memory" }}
{{- $_ := set $state "redis_url" "${REDIS_URL:-}" }}
{{- end }}
{{- $_ := set $g "state" $state }}
{{- toYaml $g }}
{{- end }}

{{/* Demo token hashes published in the README; NOTES.txt warns while any is in use. */}}
{{- define "gateway.demoHashes" -}}
- 61b89502ba471149636931e887f65a4f785d47e646b2c8521cfd02dbfed43722
- 99e07d43b8da103ae96d2e53c6bcbc310acabe7ef26339abe258d8ed748771ba
- f1f5ccf8b09e822f2c3cab8c2a1a25d956a14ce2e4d65e463c5444a56d97bd94
- d1c427901a4c2f382f196ba26bf479c6f9fbdbcd11f011ef8cf8186b3434d7d8
- 1e674add7c78b862ea2514cd96e823304d65ec7c907676ccd34c0928ea6a2195
{{- end }}

{{/* Identities still using a demo hash, comma separated. */}}
{{- define "gateway.demoIdentities" -}}
{{- $demo := include "gateway.demoHashes" . | fromYamlArray }}
{{- $out := list }}
{{- range $id, $a := .Values.config.agents }}
{{- if has ($a.token_sha256 | default "" | lower) $demo }}{{- $out = append $out (printf "agent %s" $id) }}{{- end }}
{{- end }}
{{- with .Values.config.gateway.admin }}
{{- if has (.token_sha256 | default "" | lower) $demo }}{{- $out = append $out "admin" }}{{- end }}
{{- range .reviewers }}
{{- if has (.token_sha256 | default "" | lower) $demo }}{{- $out = append $out (printf "reviewer %s" .name) }}{{- end }}
{{- end }}
{{- end }}
{{- join ", " $out }}
{{- end }}

{{/* Environment of the gateway container (both modes). */}}
{{- define "gateway.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
# The gateway collects garbage less often than Go's default (GOGC 400):
# the container's memory limit is the heap's bound.
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
{{- if .Values.redis.existingSecret }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.existingSecret }}
      key: {{ .Values.redis.existingSecretKey }}
{{- else if .Values.redis.url }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "gateway.fullname" . }}-redis
      key: redis-url
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* envFrom of the gateway container. */}}
{{- define "gateway.envFrom" -}}
{{- if .Values.secrets.existingSecret }}
- secretRef:
    name: {{ .Values.secrets.existingSecret }}
{{- else if .Values.secrets.env }}
- secretRef:
    name: {{ include "gateway.fullname" . }}-env
{{- end }}
{{- with .Values.extraEnvFrom }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Volume mounts shared by both modes (not the audit volume). */}}
{{- define "gateway.configMounts" -}}
- name: config
  mountPath: /etc/gateway/config
  readOnly: true
- name: schemas
  mountPath: /etc/gateway/schemas
  readOnly: true
{{- if eq (include "gateway.policySource" .) "mounted" }}
- name: policies
  mountPath: /etc/gateway/rego
  readOnly: true
{{- end }}
{{- range $name, $_ := include "gateway.catalogueFiles" . | fromYaml }}
- name: catalogue
  mountPath: /etc/gateway/catalogue/{{ $name }}
  subPath: {{ $name }}
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- if .Values.audit.signingKeySecret }}
- name: audit-key
  mountPath: /etc/gateway/audit-key
  readOnly: true
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Volumes shared by both modes (not the audit volume). */}}
{{- define "gateway.configVolumes" -}}
- name: config
  configMap:
    name: {{ include "gateway.configName" . }}
- name: schemas
  configMap:
    name: {{ include "gateway.schemasName" . }}
{{- if .Values.policies }}
- name: policies
  configMap:
    name: {{ include "gateway.policiesName" . }}
{{- else if .Values.policyVolume }}
- name: policies
  {{- toYaml .Values.policyVolume | nindent 2 }}
{{- end }}
- name: catalogue
  configMap:
    name: {{ include "gateway.catalogueName" . }}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- if .Values.audit.signingKeySecret }}
- name: audit-key
  secret:
    secretName: {{ .Values.audit.signingKeySecret }}
    defaultMode: 0400
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Scheme of the main port (the ServiceMonitor's): HTTPS when the gateway
terminates TLS. The probes use the health port, always plain HTTP. */}}
{{- define "gateway.probeScheme" -}}
{{- if (((.Values.config.gateway).tls).cert_file) }}HTTPS{{ else }}HTTP{{ end }}
{{- end }}

{{/* Checksum of everything read at startup only (rolls the pods on change). */}}
{{- define "gateway.configChecksum" -}}
{{- $s := printf "%s%s%s%s" (include "gateway.gatewayYaml" .) (include "gateway.schemaFiles" .) (include "gateway.catalogueFiles" .) (.Values.config.rbacModel | default "") }}
{{- if not .Values.config.hotReload }}
{{- $s = printf "%s%s%s" $s (toYaml .Values.config.agents) (toYaml .Values.config.protocol) }}
{{- end }}
{{- $s | sha256sum }}
{{- end }}
