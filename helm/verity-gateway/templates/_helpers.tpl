{{/* Chart name, truncated to the 63 characters a DNS label allows. */}}
{{- define "verity-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release-chart, unless the release already contains it. */}}
{{- define "verity-gateway.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "verity-gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "verity-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "verity-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "verity-gateway.labels" -}}
helm.sh/chart: {{ include "verity-gateway.chart" . }}
{{ include "verity-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "verity-gateway.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "verity-gateway.policiesConfigMap" -}}
{{- printf "%s-policies" (include "verity-gateway.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Where the gateway config file is mounted. */}}
{{- define "verity-gateway.configDir" -}}/etc/verity/config{{- end }}

{{/*
The gateway's config file (gateway.yaml). Keys are the gateway's own (gateway/settings/schema.py);
the gateway validates them strictly at start-up. policies_dir is not here: it is set by
GATEWAY_POLICIES_DIR, which must override the image's own GATEWAY_POLICIES_DIR anyway.
*/}}
{{- define "verity-gateway.config" -}}
{{- $cfg := dict "upstreams" .Values.upstreams "auth" .Values.auth "shadow" .Values.shadow "telemetry" .Values.telemetry "server" .Values.server -}}
{{- $_ := set $cfg "log_level" .Values.logLevel -}}
{{- $_ = set $cfg "max_body_bytes" (int64 .Values.maxBodyBytes) -}}
{{- if .Values.judge }}{{ $_ = set $cfg "judge" .Values.judge }}{{ end -}}
{{- if .Values.audit.enabled -}}
{{- $_ = set $cfg "audit" (dict "path" (printf "%s/%s" (trimSuffix "/" .Values.audit.dir) .Values.audit.file)) -}}
{{- else -}}
{{- $_ = set $cfg "audit" (dict "path" nil) -}}
{{- end -}}
{{- if .Values.fleet.enabled -}}
{{- $_ = set $cfg "shadow" (merge (dict "runner" "redis") (deepCopy .Values.shadow)) -}}
{{- $_ = set $cfg "redis" (deepCopy .Values.fleet.redis) -}}
{{- end -}}
{{- toYaml (mustMergeOverwrite $cfg (deepCopy .Values.extraConfig)) -}}
{{- end }}

{{/*
Seconds Kubernetes waits between SIGTERM and SIGKILL: the preStop sleep, in-flight
requests, the shadow queue drain (shadow.drain_seconds), the telemetry flush
(telemetry.flush_seconds) and a margin.
*/}}
{{- define "verity-gateway.terminationGracePeriodSeconds" -}}
{{- $s := .Values.shutdown -}}
{{- if $s.terminationGracePeriodSeconds -}}
{{- int $s.terminationGracePeriodSeconds -}}
{{- else -}}
{{- add (int $s.preStopSleepSeconds) (int $s.inflightSeconds) (int (ceil .Values.shadow.drain_seconds)) (int (ceil .Values.telemetry.flush_seconds)) (int $s.marginSeconds) -}}
{{- end -}}
{{- end }}

{{/* Refuse values that would leak secrets or cannot work. */}}
{{- define "verity-gateway.validate" -}}
{{- range .Values.auth.keys }}
{{- if hasKey . "key" }}
{{- fail (printf "auth.keys[%s]: use key_env with secretEnv, not key (a ConfigMap is not a secret store)" (toString .name)) }}
{{- end }}
{{- end }}
{{- if and .Values.fleet.enabled (not .Values.fleet.redis.url) }}
{{- fail "fleet.enabled needs fleet.redis.url (redis://host:6379/0)" }}
{{- end }}
{{- if and .Values.secretEnv.env (not .Values.secretEnv.secretName) }}
{{- fail "secretEnv.env is set but secretEnv.secretName is empty: name the existing Secret" }}
{{- end }}
{{- end }}

{{/* OTEL_RESOURCE_ATTRIBUTES: pod identity (from the downward API) plus otel.resourceAttributes. */}}
{{- define "verity-gateway.otelResourceAttributes" -}}
{{- $attrs := list "k8s.pod.name=$(POD_NAME)" "k8s.namespace.name=$(POD_NAMESPACE)" -}}
{{- $attrs = append $attrs (printf "service.version=%s" .Chart.AppVersion) -}}
{{- range $k, $v := .Values.otel.resourceAttributes }}
{{- $attrs = append $attrs (printf "%s=%v" $k $v) -}}
{{- end }}
{{- join "," $attrs -}}
{{- end }}

{{/*
The fleet workers' labels: another app.kubernetes.io/name, so that the relay's
selectors (Deployment, Service, PDB, HPA) never match a worker pod.
*/}}
{{- define "verity-gateway.workerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "verity-gateway.name" . | trunc 56 | trimSuffix "-" }}-worker
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "verity-gateway.workerLabels" -}}
helm.sh/chart: {{ include "verity-gateway.chart" . }}
{{ include "verity-gateway.workerSelectorLabels" . }}
app.kubernetes.io/component: worker
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}
