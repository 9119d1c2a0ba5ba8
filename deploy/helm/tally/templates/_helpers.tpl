{{/* The name of a region's full nodes (StatefulSet and its headless Service). */}}
{{- define "tally.full" -}}
{{ printf "%s-%s" .root.Release.Name .region | trunc 52 | trimSuffix "-" }}
{{- end -}}

{{/* The name of a region's edges. */}}
{{- define "tally.edge" -}}
{{ printf "%s-%s-edge" .root.Release.Name .region | trunc 52 | trimSuffix "-" }}
{{- end -}}

{{- define "tally.labels" -}}
app.kubernetes.io/name: tally
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "tally.image" -}}
{{ required "image.repository: the registry path of an image built from the repository's Dockerfile (no image is published)" .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* --join: the first full node of every region, by its stable DNS name. */}}
{{- define "tally.join" -}}
{{- $root := . -}}
{{- $seeds := list -}}
{{- range .Values.regions -}}
{{- $name := include "tally.full" (dict "root" $root "region" .name) -}}
{{- $seeds = append $seeds (printf "%s-0.%s.%s.svc:7946" $name $name $root.Release.Namespace) -}}
{{- end -}}
{{ join "," $seeds }}
{{- end -}}

{{/* --nats-url for a region, or nothing with the embedded NATS. */}}
{{- define "tally.natsURL" -}}
{{- index .root.Values.nats.regionUrls .region | default .root.Values.nats.url -}}
{{- end -}}

{{/* The flags both roles take, the secrets as files. */}}
{{- define "tally.commonArgs" -}}
- --region={{ .region }}
- --cluster={{ .root.Values.cluster }}
- --node-name=$(POD_NAME)
- --data-dir=/data
- --http-addr=:8080
- --admin-addr=:9100
- --gossip-addr=:7946
- --gossip-advertise=$(POD_IP):7946
- --gossip-profile={{ .root.Values.node.gossipProfile }}
- --join={{ include "tally.join" .root }}
- --gossip-key-file=/etc/tally/secrets/gossip-key
- --tick={{ .root.Values.node.tick }}
- --max-tick={{ .root.Values.node.maxTick }}
- --drain={{ .root.Values.node.drain }}
- --shutdown-timeout={{ .root.Values.node.shutdownTimeout }}
- --log-format={{ .root.Values.node.logFormat }}
- --demo=false
{{- with .root.Values.node.trustedProxies }}
- --trusted-proxies={{ . }}
{{- end }}
{{- with include "tally.natsURL" . }}
- --nats-url={{ . }}
{{- end }}
{{- range .root.Values.node.extraArgs }}
- {{ . }}
{{- end }}
{{- end -}}

{{/* The pod's own name and address, for --node-name and --gossip-advertise. */}}
{{- define "tally.podEnv" -}}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_IP
  valueFrom: {fieldRef: {fieldPath: status.podIP}}
{{- end -}}

{{- define "tally.probes" -}}
readinessProbe:
  httpGet: {path: /readyz, port: http}
  periodSeconds: 2
  failureThreshold: 2
livenessProbe:
  httpGet: {path: /healthz, port: http}
  initialDelaySeconds: 10
  periodSeconds: 10
  failureThreshold: 6
startupProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 2
  failureThreshold: 300   # a replay of a large ledger: up to 10 minutes
{{- end -}}

{{/* The node drains (--drain), then waits for in-flight requests
     (--shutdown-timeout); Kubernetes waits a little longer before SIGKILL. */}}
{{- define "tally.grace" -}}
{{- range list "drain" "shutdownTimeout" -}}
{{- if not (regexMatch "^[0-9]+s$" (index $.Values.node . | toString)) -}}
{{- fail (printf "node.%s %q: want whole seconds, like 5s" . (index $.Values.node . | toString)) -}}
{{- end -}}
{{- end -}}
{{- $d := .Values.node.drain | trimSuffix "s" | atoi -}}
{{- $s := .Values.node.shutdownTimeout | trimSuffix "s" | atoi -}}
{{ add $d $s 10 }}
{{- end -}}

{{- define "tally.podAnnotations" -}}
{{- if .Values.metrics.annotations }}
prometheus.io/scrape: "true"
prometheus.io/port: "9100"
prometheus.io/path: /metrics
{{- end }}
{{- end -}}
