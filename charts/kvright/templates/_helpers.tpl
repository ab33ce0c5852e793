{{/* Chart name, truncated to 63 characters (a DNS label). */}}
{{- define "kvright.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: <release>-kvright, or the release name when it already contains the chart name. */}}
{{- define "kvright.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A name derived from the full name with a suffix, still at most 63 characters. */}}
{{- define "kvright.suffixed" -}}
{{- $suffix := index . 1 -}}
{{- printf "%s-%s" (include "kvright.fullname" (index . 0) | trunc (int (sub 62 (len $suffix))) | trimSuffix "-") $suffix -}}
{{- end -}}

{{/* Selector labels: stable across upgrades (no chart version). */}}
{{- define "kvright.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kvright.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Common labels. */}}
{{- define "kvright.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kvright.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kvright
{{- end -}}

{{/* The operator's ServiceAccount. Not created: it must be named, or the operator would run as, and the
     ClusterRoles be bound to, the namespace's "default" ServiceAccount, which every other pod there uses. */}}
{{- define "kvright.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kvright.fullname" .) .Values.serviceAccount.name -}}
{{- else if .Values.serviceAccount.name -}}
{{- .Values.serviceAccount.name -}}
{{- else -}}
{{- fail "serviceAccount.create=false needs serviceAccount.name: the ServiceAccount you made for the operator (without it the pod would run as, and the roles be bound to, the namespace's default ServiceAccount, which every other pod in the namespace uses)" -}}
{{- end -}}
{{- end -}}

{{/* The labels every vLLM pod kvright renders carries whatever its LLMDeployment (kvright.render.labels):
     kvright's own vLLM pods, not any vLLM pod. */}}
{{- define "kvright.vllmPodLabels" -}}
app.kubernetes.io/name: vllm
app.kubernetes.io/managed-by: kvright
{{- end -}}

{{- define "kvright.metricsServiceName" -}}
{{- include "kvright.suffixed" (list . "metrics") -}}
{{- end -}}

{{/* The job label Prometheus gives the operator's scrape (ServiceMonitor: the Service name). */}}
{{- define "kvright.operatorJob" -}}
{{- default (include "kvright.metricsServiceName" .) .Values.prometheusRule.operatorJob -}}
{{- end -}}

{{- define "kvright.replicas" -}}
{{- if .Values.ha.enabled -}}{{ .Values.ha.replicas }}{{- else -}}{{ .Values.replicaCount }}{{- end -}}
{{- end -}}

{{/* What the operator does to LLMDeployments and their children (Deployment, Service, PodDisruptionBudget,
     PodMonitor). */}}
{{- define "kvright.workloadRules" -}}
# Each verb here is used by some operator path (tests/integration/test_rbac_audit.py proves it from the API
# server's audit log); none is granted "just in case".
# kopf lists and watches LLMDeployments and patches its annotations on them; the sweep lists them; get reads
# one again before reconciling a body older than the operator's own last status write (a watch event's, or
# the sweep's listing taken before a handler's move). No update.
- apiGroups: [kvright.dev]
  resources: [llmdeployments]
  verbs: [get, list, watch, patch]
- apiGroups: [kvright.dev]
  resources: [llmdeployments/status]
  verbs: [patch]
# ownerReferences with blockOwnerDeletion on children need update on the owner's finalizers.
- apiGroups: [kvright.dev]
  resources: [llmdeployments/finalizers]
  verbs: [update]
# The one-node workload: get (its rollout; the other kind's after a move), create and patch (server-side apply;
# an apply that creates is also authorized as create), delete (the Deployment of a previous plan once the
# LeaderWorkerSet of a plan over several nodes is applied). No list, watch or update.
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, create, patch, delete]
# Service, PodDisruptionBudget and PodMonitor: server-side apply only, never read, updated or deleted
# (garbage collection does).
- apiGroups: [""]
  resources: [services]
  verbs: [create, patch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [create, patch]
- apiGroups: [monitoring.coreos.com]
  resources: [podmonitors]
  verbs: [create, patch]
# config.json from spec.model.configMapRef: read by name.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
# vLLM pods: listed by label (readiness, which template they run, why one cannot be scheduled, how long
# each took to start: status.coldStart).
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
# core/v1 Events, posted (kopf and the sweep post them; neither patches one).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# An HPA that targets the LLMDeployment or its Deployment owns replicas: listed, to step aside.
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [list]
{{- end -}}

{{/* Per-second rate of the TPOT histogram buckets by (labels, le), current vLLM name or else the legacy one.
     Args: list <by> <window>. */}}
{{- define "kvright.tpotBucketRate" -}}
{{- $by := index . 0 -}}{{- $w := index . 1 -}}
sum by ({{ $by }}, le) (rate(vllm:request_time_per_output_token_seconds_bucket[{{ $w }}]))
    or
    sum by ({{ $by }}, le) (rate(vllm:time_per_output_token_seconds_bucket[{{ $w }}]))
{{- end -}}

{{/* Mean of a histogram over a window: rate(sum) / rate(count). Args: list <by> <metric> <window>. */}}
{{- define "kvright.meanRate" -}}
{{- $by := index . 0 -}}{{- $m := index . 1 -}}{{- $w := index . 2 -}}
sum by ({{ $by }}) (rate({{ $m }}_sum[{{ $w }}])) / sum by ({{ $by }}) (rate({{ $m }}_count[{{ $w }}]))
{{- end -}}

{{/* One alerting rule. Args: dict root name cfg expr summary description. */}}
{{- define "kvright.alertRule" -}}
{{- $r := .root.Values.prometheusRule -}}
- alert: KVRight{{ .name }}
  expr: |-
    {{- .expr | nindent 4 }}
  for: {{ .cfg.for }}
  labels:
    severity: {{ .cfg.severity }}
    {{- with $r.additionalAlertLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    summary: {{ .summary | quote }}
    description: {{ .description | quote }}
    runbook_url: {{ printf "%sKVRight%s.md" $r.runbookBaseURL .name | quote }}
{{- end -}}

{{/* A map as comma-separated KEY=VALUE pairs in key order: operator.gpuPrices as KVRIGHT_GPU_PRICES
     (PRODUCT=USD), podMonitor.labels as KVRIGHT_PODMONITOR_LABELS. */}}
{{- define "kvright.pairs" -}}
{{- $pairs := list -}}
{{- range $product, $usd := . -}}
{{- $pairs = append $pairs (printf "%s=%v" $product $usd) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* podMonitor.labels as KVRIGHT_PODMONITOR_LABELS, each key checked first (the schema checks the values; a
     schema check of map keys reports them at a wrong path in Helm 3.22). The operator checks them again. */}}
{{- define "kvright.podMonitorLabels" -}}
{{- $own := list "app.kubernetes.io/managed-by" "app.kubernetes.io/name" "app.kubernetes.io/instance" "kvright.dev/llmdeployment" -}}
{{- range $key, $_ := . -}}
{{- if has $key $own -}}
{{- fail (printf "podMonitor.labels: %q is a label kvright sets on its PodMonitors itself; accepted: any other key (kvright's own: %s)" $key (join ", " $own)) -}}
{{- end -}}
{{- $name := regexReplaceAll "^.*/" $key "" -}}
{{- $prefix := trimSuffix "/" (trimSuffix $name $key) -}}
{{- if or (gt (len $name) 63) (gt (len $prefix) 253) (not (regexMatch "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$" $name)) (and (contains "/" $key) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $prefix))) -}}
{{- fail (printf "podMonitor.labels: %q is not a Kubernetes label key; accepted: [PREFIX/]NAME, NAME at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, PREFIX a lower-case DNS subdomain (e.g. release, example.com/team)" $key) -}}
{{- end -}}
{{- end -}}
{{- include "kvright.pairs" . -}}
{{- end -}}

{{/* operator.prometheusURL and operator.prometheusAuth, checked before anything renders: what the operator
     refuses at startup (credentials in the URL, one Authorization header per query, credentials with nowhere
     to go, a CA on plain http) fails the install here instead of crash-looping the pod, and so do two sources
     (caSecret, caConfigMap) for its one CA file. The URL is never echoed: it may carry credentials. */}}
{{- /* The operator refuses a health port equal to the metrics port; refuse it at install time too. */ -}}
{{- define "kvright.checkPorts" -}}
{{- if eq (int .Values.health.port) (int .Values.metrics.port) }}
{{- fail (printf "health.port %d is metrics.port too; set another port for the liveness endpoint" (int .Values.health.port)) }}
{{- end }}
{{- end }}

{{- define "kvright.checkPrometheusAuth" -}}
{{- $auth := .Values.operator.prometheusAuth -}}
{{- $url := .Values.operator.prometheusURL -}}
{{- if regexMatch "^https?://[^/]*@" $url -}}
{{- fail "operator.prometheusURL carries credentials (user:password@), which would sit in the Deployment's manifest; accepted: a URL without them, with operator.prometheusAuth.basicAuthSecret (or bearerTokenSecret)" -}}
{{- end -}}
{{- $sources := list -}}
{{- if $auth.bearerTokenSecret }}{{ $sources = append $sources "bearerTokenSecret" }}{{ end -}}
{{- if $auth.serviceAccountToken }}{{ $sources = append $sources "serviceAccountToken" }}{{ end -}}
{{- if $auth.basicAuthSecret }}{{ $sources = append $sources "basicAuthSecret" }}{{ end -}}
{{- if gt (len $sources) 1 -}}
{{- fail (printf "operator.prometheusAuth: %s are set together; accepted: at most one of bearerTokenSecret, serviceAccountToken and basicAuthSecret (each is a whole Authorization header)" (join " and " $sources)) -}}
{{- end -}}
{{- if and $auth.caSecret $auth.caConfigMap -}}
{{- fail "operator.prometheusAuth: caSecret and caConfigMap are set together; accepted: at most one of caSecret and caConfigMap (both would be the one CA file, KVRIGHT_PROMETHEUS_CA_FILE)" -}}
{{- end -}}
{{- $ca := "" -}}
{{- if $auth.caSecret }}{{ $ca = "caSecret" }}{{ else if $auth.caConfigMap }}{{ $ca = "caConfigMap" }}{{ end -}}
{{- $set := $sources -}}
{{- if $ca }}{{ $set = prepend $set $ca }}{{ end -}}
{{- if and $set (not $url) -}}
{{- fail (printf "operator.prometheusAuth sets %s but operator.prometheusURL is empty (feedback off: nothing to authenticate to); accepted: operator.prometheusURL set to the Prometheus that needs them, or operator.prometheusAuth left unset" (join " and " $set)) -}}
{{- end -}}
{{- if and $ca (hasPrefix "http://" $url) -}}
{{- fail (printf "operator.prometheusAuth.%s is set with an http:// operator.prometheusURL: a CA only verifies an https:// Prometheus's certificate; accepted: an https:// operator.prometheusURL, or %s empty" $ca $ca) -}}
{{- end -}}
{{- end -}}

{{/* Mode of the mounted Prometheus credential files. With an fsGroup the kubelet gives the files to that group,
     which the non-root operator is in: group-readable is enough. Without one in the values (fsGroup: null, e.g.
     to leave it to an OpenShift SCC, which the chart cannot see) they may stay root's, and only world-readable
     is sure to let the operator read them. */}}
{{- define "kvright.prometheusSecretMode" -}}
{{- if (default dict .Values.podSecurityContext).fsGroup -}}0440{{- else -}}0444{{- end -}}
{{- end -}}
