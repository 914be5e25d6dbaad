{{/*
The chart's name, or nameOverride.
*/}}
{{- define "switchyard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The fully qualified app name: the release name, with the chart's name when the
release name does not already hold it. 63 characters at most (DNS labels).
*/}}
{{- define "switchyard.fullname" -}}
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

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "switchyard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object.
*/}}
{{- define "switchyard.labels" -}}
helm.sh/chart: {{ include "switchyard.chart" . }}
{{ include "switchyard.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: switchyard
{{- end }}

{{/*
Labels that select the gateway's pods (never change them: a Deployment's
selector is immutable).
*/}}
{{- define "switchyard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The image reference; the tag defaults to the chart's appVersion.
*/}}
{{- define "switchyard.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}

{{/*
The ServiceAccount's name.
*/}}
{{- define "switchyard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "switchyard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
server.shutdown_grace_ms from the config, or the gateway's default (15000).
*/}}
{{- define "switchyard.shutdownGraceMs" -}}
{{- $server := (.Values.config).server | default dict }}
{{- if hasKey $server "shutdown_grace_ms" }}
{{- int64 $server.shutdown_grace_ms }}
{{- else }}
{{- 15000 }}
{{- end }}
{{- end }}

{{/*
HTTPS when the config serves TLS itself.
*/}}
{{- define "switchyard.scheme" -}}
{{- if ((.Values.config).server | default dict).tls }}HTTPS{{ else }}HTTP{{ end }}
{{- end }}

{{/*
Refuses values that would render a broken or unsafe release.
*/}}
{{- define "switchyard.validate" -}}
{{- $graceS := divf (include "switchyard.shutdownGraceMs" . | float64) 1000.0 }}
{{- $preStop := int .Values.lifecycle.preStopSleepSeconds }}
{{- $needed := addf $graceS $preStop }}
{{- if le (float64 .Values.terminationGracePeriodSeconds) $needed }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed lifecycle.preStopSleepSeconds (%d) + config.server.shutdown_grace_ms/1000 (%v), or the kubelet kills requests still draining" .Values.terminationGracePeriodSeconds $preStop $graceS) }}
{{- end }}
{{- if and .Values.persistence.enabled (or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1)) }}
{{- fail "persistence.enabled keeps the SQLite ledger on one PersistentVolumeClaim, which only one pod may use: set replicaCount to 1 and autoscaling.enabled to false, or turn persistence off (an emptyDir ledger per pod)" }}
{{- end }}
{{- $ledger := ((.Values.config).ledger | default dict).path | default "" }}
{{- if and $ledger (hasPrefix "/" $ledger) (not (hasPrefix "/var/lib/switchyard/" $ledger)) }}
{{- fail (printf "config.ledger.path (%s) must be under /var/lib/switchyard/, the pod's one writable directory for data (the root filesystem is read-only)" $ledger) }}
{{- end }}
{{- $probing := or .Values.probes.liveness.enabled .Values.probes.readiness.enabled .Values.probes.startup.enabled }}
{{- if and $probing (((.Values.config).server | default dict).tls | default dict).client_ca_file }}
{{- fail "config.server.tls.client_ca_file makes the gateway demand a client certificate on every connection, which the kubelet's probes do not present: turn the probes off (probes.*.enabled)" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (not ((.Values.resources).requests).cpu) }}
{{- fail "autoscaling.enabled scales on CPU utilisation, which needs resources.requests.cpu" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail "autoscaling.minReplicas is above autoscaling.maxReplicas" }}
{{- end }}
{{- if and .Values.ingress.enabled (not .Values.ingress.hosts) }}
{{- fail "ingress.enabled needs at least one entry in ingress.hosts (host \"\" matches any host)" }}
{{- end }}
{{- if and .Values.httpRoute.enabled (not .Values.httpRoute.parentRefs) }}
{{- fail "httpRoute.enabled needs httpRoute.parentRefs: the Gateway (name, and namespace when it is in another one) whose listeners should carry the route; without one no Gateway serves it" }}
{{- end }}
{{- if and (gt $preStop 0) (semverCompare "<1.30.0-0" .Capabilities.KubeVersion.Version) }}
{{- fail (printf "lifecycle.preStopSleepSeconds uses the preStop sleep action, on by default only from Kubernetes 1.30 (this is %s): set it to 0" .Capabilities.KubeVersion.Version) }}
{{- end }}
{{- end }}

{{/*
The config file's text: .Values.config, with demoConfig's backends (and
routes) when it names no backends of its own. Helm merges maps from values
files key by key, so backends kept as defaults in config would leak into every
user's config.
*/}}
{{- define "switchyard.config" -}}
{{- $config := deepCopy (.Values.config | default dict) }}
{{- if not $config.backends }}
{{- $demo := .Values.demoConfig | default dict }}
{{- $_ := set $config "backends" (deepCopy ($demo.backends | default dict)) }}
{{- if and (not $config.routes) $demo.routes }}
{{- $_ := set $config "routes" (deepCopy $demo.routes) }}
{{- end }}
{{- end }}
{{- if not $config.backends }}
{{- fail "config.backends: the Switchyard config needs at least one backend" }}
{{- end }}
{{- /* The config says what the pod does: it listens on the container port
(the command line's --listen says the same). */}}
{{- $server := deepCopy ($config.server | default dict) }}
{{- $_ := set $server "listen" (printf "%s:%d" .Values.listenHost (int .Values.containerPort)) }}
{{- $_ := set $config "server" $server }}
{{- toYaml $config }}
{{- end }}

{{/*
The container's environment: secretEnv (variables from existing Secrets), env
and envFrom. The gateway and the check-config init container take the same,
so every `env:NAME` the check finds set is the one the gateway will read.
*/}}
{{- define "switchyard.containerEnv" -}}
{{- if or .Values.env .Values.secretEnv }}
env:
  {{- range .Values.secretEnv }}
  - name: {{ required "secretEnv[].name is required" .name }}
    valueFrom:
      secretKeyRef:
        name: {{ required "secretEnv[].secretName is required" .secretName }}
        key: {{ required "secretEnv[].key is required" .key }}
        {{- if hasKey . "optional" }}
        optional: {{ .optional }}
        {{- end }}
  {{- end }}
  {{- with .Values.env }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- with .Values.envFrom }}
envFrom:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The pod's config volume: the chart's ConfigMap (the default), the chart's
Secret (configSecret.enabled), or a Secret the user made
(configSecret.existingSecret). Mounted as a whole directory either way: a
subPath mount would never see an update.
*/}}
{{- define "switchyard.configVolume" -}}
{{- $existing := .Values.configSecret.existingSecret }}
{{- if $existing }}
secret:
  secretName: {{ $existing }}
  {{- if ne .Values.configSecret.key "config.yaml" }}
  # The gateway reads config.yaml: map the Secret's key onto that name.
  items:
    - key: {{ .Values.configSecret.key }}
      path: config.yaml
  {{- end }}
{{- else if .Values.configSecret.enabled }}
secret:
  secretName: {{ include "switchyard.fullname" . }}
{{- else }}
configMap:
  name: {{ include "switchyard.fullname" . }}
{{- end }}
{{- end }}
