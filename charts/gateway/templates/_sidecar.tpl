{{/*
Sidecar mode. An application chart that depends on this chart (alias "gateway",
mode: sidecar) adds the gateway to its agent pods:

  spec:
    containers:
      - name: agent
        env:
          - name: OPENAI_BASE_URL
            value: {{ include "gateway.sidecar.baseURL" (dict "Values" .Values.gateway "Release" .Release) }}
          - name: ANTHROPIC_BASE_URL
            value: {{ include "gateway.sidecar.anthropicBaseURL" (dict "Values" .Values.gateway "Release" .Release) }}
      {{- include "gateway.sidecar" (dict "Values" .Values.gateway "Release" .Release) | nindent 6 }}
    volumes:
      {{- include "gateway.sidecar.volumes" (dict "Values" .Values.gateway "Release" .Release) | nindent 6 }}

The context is a dict with the gateway chart's values ("Values") and the
release ("Release"); inside this chart it is simply ".". The ConfigMaps and
Secrets it refers to are those this chart renders (in either mode) under the
same release, so names match. The agent's container talks to
http://127.0.0.1:<sidecar.port>/v1 and needs no token: the gateway attributes
every request to sidecar.agent (it must exist in config.agents), whatever
placeholder key the SDK sends (OpenAI's and Anthropic's SDKs insist on one).
Only another agent's token is refused.

The pod's securityContext should keep runAsNonRoot and fsGroup 65532 so the
gateway can write the audit volume; the container sets its own securityContext.
*/}}

{{/* OPENAI_BASE_URL for the agent container. */}}
{{- define "gateway.sidecar.baseURL" -}}
http://127.0.0.1:{{ .Values.sidecar.port }}/v1
{{- end }}

{{/* ANTHROPIC_BASE_URL for the agent container (Anthropic's SDKs add /v1 themselves). */}}
{{- define "gateway.sidecar.anthropicBaseURL" -}}
http://127.0.0.1:{{ .Values.sidecar.port }}
{{- end }}

{{/* The gateway container (one list item for the pod's containers). */}}
{{- define "gateway.sidecar" -}}
{{- $sc := .Values.sidecar }}
{{- $img := .Values.image }}
{{- $tag := $img.tag | default "" | toString }}
{{- if not $tag }}{{- $tag = (.Chart).AppVersion | default "latest" }}{{- end -}}
- name: gateway
  image: {{ printf "%s:%s" $img.repository $tag }}
  imagePullPolicy: {{ $img.pullPolicy }}
  args:
    - serve
    - --config
    - /etc/gateway/config
    - --sidecar-agent
    - {{ required "sidecar.agent: the agent id this sidecar acts as" $sc.agent | quote }}
    - --listen
    - "127.0.0.1:{{ $sc.port }}"
  env:
    {{- include "gateway.env" . | nindent 4 }}
  {{- with (include "gateway.envFrom" . | trim) }}
  envFrom:
    {{- . | nindent 4 }}
  {{- end }}
  {{- if $sc.probes.enabled }}
  {{- $probe := list }}
  {{- range $sc.probes.command }}{{- $probe = append $probe . }}{{- end }}
  # The gateway listens on loopback, out of the kubelet's reach: exec probes,
  # on its health port (health_listen, plain HTTP whatever tls says).
  {{- $health := include "gateway.healthPort" . }}
  startupProbe:
    exec:
      command: {{ append $probe (printf "http://127.0.0.1:%v/healthz" $health) | toJson }}
    periodSeconds: 2
    timeoutSeconds: 3
    failureThreshold: 30
  livenessProbe:
    exec:
      command: {{ append $probe (printf "http://127.0.0.1:%v/healthz" $health) | toJson }}
    periodSeconds: 10
    timeoutSeconds: 3
    failureThreshold: 3
  readinessProbe:
    exec:
      command: {{ append $probe (printf "http://127.0.0.1:%v/readyz" $health) | toJson }}
    periodSeconds: 5
    timeoutSeconds: 3
    failureThreshold: 2
  {{- end }}
  resources:
    {{- toYaml $sc.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: gateway-audit
      mountPath: /data/audit
    {{- include "gateway.configMounts" . | replace "- name: " "- name: gateway-" | nindent 4 }}
{{- end }}

{{/* The volumes the sidecar needs (list items for the pod's volumes). */}}
{{- define "gateway.sidecar.volumes" -}}
{{- $sc := .Values.sidecar -}}
- name: gateway-audit
  {{- if $sc.audit.existingClaim }}
  persistentVolumeClaim:
    claimName: {{ $sc.audit.existingClaim }}
  {{- else }}
  emptyDir:
    sizeLimit: {{ $sc.audit.sizeLimit }}
  {{- end }}
{{- include "gateway.configVolumes" . | replace "- name: " "- name: gateway-" | nindent 0 }}
{{- end }}
