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
- --expect-full-nodes={{ include "tally.fullNodes" .root }}
- --tick={{ .root.Values.node.tick }}
- --max-tick={{ .root.Values.node.maxTick }}
- --drain={{ .root.Values.node.drain }}
- --shutdown-timeout={{ .root.Values.node.shutdownTimeout }}
- --log-format={{ .root.Values.node.logFormat }}
- --demo=false
{{- with include "tally.publicURL" .root }}
- --public-url={{ . }}
{{- end }}
{{- with .root.Values.node.trustedProxies }}
- --trusted-proxies={{ . }}
{{- end }}
{{- if eq (include "tally.voterSessions" .root) "true" }}
- --require-session
{{- end }}
{{- with include "tally.origins" .root }}
- --origins={{ . }}
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


{{/* --public-url: publicUrl, else the Ingress's host; "" without either.
     Checked as the node checks it (node/config.go). */}}
{{- define "tally.publicURL" -}}
{{- $u := .Values.publicUrl | default "" -}}
{{- if and (not $u) .Values.ingress.enabled .Values.ingress.host -}}
{{- $u = printf "%s://%s" (ternary "https" "http" (ne .Values.ingress.tlsSecretName "")) .Values.ingress.host -}}
{{- end -}}
{{- if $u -}}
{{- if not (regexMatch "^https?://[^/?#@[:space:]]+(/[^?#[:space:]]*)?$" $u) -}}
{{- fail (printf "publicUrl %q: want the http(s) address voters reach the page at, like https://vote.example.com (no query or fragment)" $u) -}}
{{- end -}}
{{- trimSuffix "/" $u -}}
{{- end -}}
{{- end -}}

{{/* How voters reach the page from outside, for the messages: an
     Ingress, publicUrl, a LoadBalancer or a NodePort Service; "" without
     any. */}}
{{- define "tally.public" -}}
{{- if .Values.ingress.enabled -}}
an Ingress (ingress.enabled)
{{- else if .Values.publicUrl -}}
publicUrl {{ .Values.publicUrl }}
{{- else if eq (toString .Values.service.type) "LoadBalancer" -}}
a LoadBalancer Service (service.type)
{{- else if eq (toString .Values.service.type) "NodePort" -}}
a NodePort Service (service.type: every node's address)
{{- end -}}
{{- end -}}

{{/* Whether voters need a session, "true" or "false": node.requireSession,
     or the last --require-session of node.extraArgs, which the node reads
     after it. A public install (tally.public) without sessions is refused
     unless allowAnonymousVoters says it is meant: its voter ids would be
     whatever the requests say (docs/defences.md, "Without voter
     sessions"). */}}
{{- define "tally.voterSessions" -}}
{{- $v := "true" -}}
{{- if not (kindIs "invalid" .Values.node.requireSession) }}{{ $v = toString .Values.node.requireSession }}{{ end -}}
{{- if not (has $v (list "true" "false")) -}}
{{- fail (printf "node.requireSession %q: want true (votes need a voter token, --require-session) or false" $v) -}}
{{- end -}}
{{- $anon := toString (.Values.allowAnonymousVoters | default false) -}}
{{- if not (has $anon (list "true" "false")) -}}
{{- fail (printf "allowAnonymousVoters %q: want true or false" $anon) -}}
{{- end -}}
{{- $on := eq $v "true" -}}
{{- range .Values.node.extraArgs -}}
{{- if regexMatch "^--?require-session(=(1|t|T|true|TRUE|True))?$" (toString .) }}{{ $on = true }}{{ end -}}
{{- if regexMatch "^--?require-session=(0|f|F|false|FALSE|False)$" (toString .) }}{{ $on = false }}{{ end -}}
{{- end -}}
{{- $public := include "tally.public" . -}}
{{- if and (not $on) $public (ne $anon "true") -}}
{{- fail (printf "voter sessions are off (node.requireSession false, or --require-session=false in node.extraArgs) with %s: anyone who reaches the page could vote as often as they make up voter ids. Set node.requireSession=true (each vote needs a voter token from POST /v1/session; the page earns one itself), or, only for a studio, a trusted kiosk or a closed network whose voter ids come from a system you trust, allowAnonymousVoters=true (docs/defences.md, \"Without voter sessions\")" $public) -}}
{{- end -}}
{{- ternary "true" "false" $on -}}
{{- end -}}

{{/* --origins: node.origins, a list or a comma-separated string of host
     patterns; "" without any. Checked as the node checks them
     (node/flags.go): a host pattern, no scheme, path or space, and none
     that lets in every site or a top-level domain ("*", "*.com"). */}}
{{- define "tally.origins" -}}
{{- $o := .Values.node.origins | default list -}}
{{- if kindIs "string" $o -}}
{{- $o = splitList "," $o -}}
{{- end -}}
{{- $out := list -}}
{{- range $o -}}
{{- $p := toString . | trim -}}
{{- if $p -}}
{{- if not (regexMatch "^[^/[:space:],]+$" $p) -}}
{{- fail (printf "node.origins %q: want host patterns of the sites that embed the page, like www.example.com or *.example.org (no scheme, no path)" $p) -}}
{{- end -}}
{{- $host := regexReplaceAll ":[0-9*]*$" $p "" -}}
{{- if regexMatch "[*?\\[]" $host -}}
{{- $labels := compact (splitList "." (regexFind "[^*?\\[]*$" $host)) -}}
{{- if lt (len $labels) 2 -}}
{{- fail (printf "node.origins %q lets in every site (or a whole top-level domain): the sites it names may make their visitors vote; name them, like www.example.com or *.example.org" $p) -}}
{{- end -}}
{{- end -}}
{{- $out = append $out ($p | lower) -}}
{{- end -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/* The labels that pick a region's full nodes or edges. */}}
{{- define "tally.selector" -}}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
tally/region: {{ .region }}
{{- end -}}

{{/* The pod-level "restricted" settings (values podSecurityContext). */}}
{{- define "tally.podSecurity" -}}
automountServiceAccountToken: false # the node never calls the Kubernetes API
enableServiceLinks: false           # a Service's variables would be TALLY_*, read as flags
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{/* The container's "restricted" settings (values securityContext). */}}
{{- define "tally.containerSecurity" -}}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
{{- end -}}

{{/* Where a region's full nodes or edges run: nodeSelector,
     tolerations, a topology spread a key and, for full nodes, pod
     anti-affinity by machine. cfg is full or edge of the values. */}}
{{- define "tally.scheduling" -}}
{{- $ctx := . -}}
{{- $sel := include "tally.selector" . -}}
{{- with .cfg.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .cfg.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .cfg.spread.topologyKeys }}
{{- if not (has $ctx.cfg.spread.whenUnsatisfiable (list "ScheduleAnyway" "DoNotSchedule")) }}
{{- fail (printf "%s.spread.whenUnsatisfiable %q: want ScheduleAnyway or DoNotSchedule" $ctx.key (toString $ctx.cfg.spread.whenUnsatisfiable)) }}
{{- end }}
topologySpreadConstraints:
{{- range . }}
  - topologyKey: {{ . }}
    maxSkew: {{ $ctx.cfg.spread.maxSkew | default 1 }}
    whenUnsatisfiable: {{ $ctx.cfg.spread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- $sel | nindent 8 }}
    {{- if eq $ctx.component "edge" }}
    matchLabelKeys: [pod-template-hash] # a rollout's new pods spread among themselves
    {{- end }}
{{- end }}
{{- end }}
{{- $anti := .cfg.antiAffinity | default "none" }}
{{- if not (has $anti (list "soft" "hard" "none")) }}
{{- fail (printf "%s.antiAffinity %q: want soft, hard or none" .key $anti) }}
{{- end }}
{{- if eq $anti "soft" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- $sel | nindent 14 }}
{{- else if eq $anti "hard" }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- $sel | nindent 12 }}
{{- end }}
{{- end -}}

{{/* The scratch directory that lets the root filesystem stay read-only. */}}
{{- define "tally.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmp.sizeLimit }}
{{- end -}}

{{/* --ack-copies of the full nodes: node.ackCopies, 1 or 2. With 2 every
     full node's votes are copied to another full node before their ack
     (docs/operations.md, "Two machines"), so the cluster needs two full
     nodes at least: with one, every vote would be refused 503 no_copy. */}}
{{- define "tally.ackCopies" -}}
{{- $c := .Values.node.ackCopies | toString -}}
{{- if not (has $c (list "1" "2")) -}}
{{- fail (printf "node.ackCopies %q: want 1 or 2 (machines an acknowledged vote is on)" $c) -}}
{{- end -}}
{{- $full := 0 -}}
{{- range .Values.regions }}{{ $full = add $full (int .full.replicas) }}{{ end -}}
{{- if and (eq $c "2") (lt (int $full) 2) -}}
{{- fail (printf "node.ackCopies 2 with %d full node(s) in all regions (regions[].full.replicas): a vote is copied to another full node before its ack, so run 2 or more, or set node.ackCopies=1 (a lost machine then loses what it acknowledged)" (int $full)) -}}
{{- end -}}
{{- $c -}}
{{- end -}}

{{/* The full nodes of the release, every region's: what --expect-full-nodes
counts (edges, which the autoscaler adds and removes, apart). */}}
{{- define "tally.fullNodes" -}}
{{- $n := 0 -}}
{{- range .Values.regions -}}
{{- $n = add $n .full.replicas -}}
{{- end -}}
{{- $n -}}
{{- end -}}
