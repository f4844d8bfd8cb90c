{{/*
Names. Namespaced objects carry the names spec 001 and the services' defaults use
(coxswain-controller-discovery, coxswain-controller-discovery-bootstrap, coxswain-proxy, ...), so
one release per namespace. Cluster-scoped objects are prefixed with the release's full name, so
releases in two namespaces do not collide.
*/}}
{{- define "coxswain.fullname" -}}
{{- if contains "coxswain" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-coxswain" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "coxswain.discoveryService" -}}coxswain-controller-discovery{{- end -}}
{{- define "coxswain.bootstrapService" -}}coxswain-controller-discovery-bootstrap{{- end -}}
{{- define "coxswain.trustConfigMap" -}}coxswain-discovery-trust{{- end -}}

{{/* The leader's label (spec 001), which the discovery and API Services select. */}}
{{- define "coxswain.leaderLabel" -}}discovery.coxswain-labs.dev/leader{{- end -}}

{{/* In-cluster DNS names of a Service: short and fully qualified. */}}
{{- define "coxswain.serviceDNS" -}}
{{- $ := index . 0 -}}{{- $name := index . 1 -}}
{{- printf "%s.%s.svc,%s.%s.svc.%s" $name $.Release.Namespace $name $.Release.Namespace $.Values.clusterDomain -}}
{{- end -}}

{{/* Where proxies dial: the discovery stream (mTLS) and the identity service. */}}
{{- define "coxswain.discoveryEndpoint" -}}
{{- printf "https://%s.%s.svc:50051" (include "coxswain.discoveryService" .) .Release.Namespace -}}
{{- end -}}
{{- define "coxswain.bootstrapEndpoint" -}}
{{- printf "%s.%s.svc:50052" (include "coxswain.bootstrapService" .) .Release.Namespace -}}
{{- end -}}

{{/* Labels. Called with (list $ "<component name>" "<component>"). */}}
{{- define "coxswain.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ index . 1 }}
app.kubernetes.io/instance: {{ $.Release.Name }}
{{- end -}}

{{- define "coxswain.labels" -}}
{{- $ := index . 0 -}}
{{ include "coxswain.selectorLabels" (list $ (index . 1)) }}
app.kubernetes.io/component: {{ index . 2 }}
app.kubernetes.io/part-of: coxswain
app.kubernetes.io/version: {{ $.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" $.Chart.Name $.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* Labels of the chart's objects that belong to no one component. */}}
{{- define "coxswain.commonLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: coxswain
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The shared proxy pods' labels, which every shared Gateway's VIP Service selects
(--shared-proxy-selector): the controller cannot know the release's name (spec 002), the chart
does. The component keeps dedicated proxies (component dedicated-proxy) out.
*/}}
{{- define "coxswain.sharedProxyLabels" -}}
{{ include "coxswain.selectorLabels" (list . "coxswain-proxy") }}
app.kubernetes.io/component: shared-proxy
{{- end -}}
{{- define "coxswain.sharedProxySelector" -}}
{{- $pairs := list -}}
{{- range $key, $value := include "coxswain.sharedProxyLabels" . | fromYaml -}}
{{- $pairs = append $pairs (printf "%s=%s" $key $value) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* An image: (list $ .Values.<component>.image). A digest wins over a tag. */}}
{{- define "coxswain.image" -}}
{{- $ := index . 0 -}}{{- $image := index . 1 -}}
{{- $repository := printf "%s/%s" $.Values.image.registry $image.repository -}}
{{- if not $.Values.image.registry -}}{{- $repository = $image.repository -}}{{- end -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default $.Chart.AppVersion (default $.Values.image.tag $image.tag)) -}}
{{- end -}}
{{- end -}}

{{/* The pod's security context: non-root, the runtime's seccomp profile. */}}
{{- define "coxswain.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsGroup }}
fsGroup: {{ .Values.securityContext.runAsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
A container's security context: (list $ <binds a port below 1024>). Read-only root, no
privilege escalation, every capability dropped; NET_BIND_SERVICE only for a container asked to
bind a port below 1024.
*/}}
{{- define "coxswain.containerSecurityContext" -}}
{{- $ := index . 0 -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
  {{- if index . 1 }}
  add: [NET_BIND_SERVICE]
  {{- end }}
{{- end -}}

{{/*
Topology spread: (list $ <component values> "<component name>"). The values' own constraints if
given, else spread over nodes and zones, best effort, by the component's selector labels.
*/}}
{{- define "coxswain.topologySpread" -}}
{{- $ := index . 0 -}}{{- $values := index . 1 -}}{{- $name := index . 2 -}}
{{- if $values.topologySpreadConstraints -}}
{{ toYaml $values.topologySpreadConstraints }}
{{- else -}}
{{- range $key := list "kubernetes.io/hostname" "topology.kubernetes.io/zone" }}
- maxSkew: 1
  topologyKey: {{ $key }}
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "coxswain.selectorLabels" (list $ $name) | nindent 6 }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* Scheduling fields every Deployment takes from its component's values. */}}
{{- define "coxswain.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* Probes on the admin port (every service's /healthz and /readyz). */}}
{{- define "coxswain.probes" -}}
readinessProbe:
  httpGet: {path: /readyz, port: admin}
  periodSeconds: 5
  failureThreshold: 3
livenessProbe:
  httpGet: {path: /healthz, port: admin}
  initialDelaySeconds: 10
  periodSeconds: 10
  failureThreshold: 6
{{- end -}}

{{/* /tmp as a small emptyDir: the root filesystem is read-only. */}}
{{- define "coxswain.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}
{{- define "coxswain.tmpMount" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/*
The shared proxy's worker count: proxy.shared.workers, or (0) the CPUs its resources allow,
rounded up: the limit, else the request, else 1 (the controller does the same for dedicated
proxies; a container's os.cpu_count() is the node's).
*/}}
{{- define "coxswain.sharedWorkers" -}}
{{- $shared := .Values.proxy.shared -}}
{{- if gt (int $shared.workers) 0 -}}
{{- $shared.workers -}}
{{- else -}}
{{- $resources := $shared.resources | default dict -}}
{{- $cpu := "" -}}
{{- with $resources.requests }}{{ with .cpu }}{{ $cpu = toString . }}{{ end }}{{ end -}}
{{- with $resources.limits }}{{ with .cpu }}{{ $cpu = toString . }}{{ end }}{{ end -}}
{{- if not $cpu -}}
1
{{- else if hasSuffix "m" $cpu -}}
{{- max 1 (div (add (trimSuffix "m" $cpu | int) 999) 1000) -}}
{{- else -}}
{{- max 1 (ceil (float64 $cpu) | int) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Whether the shared proxy binds a port below 1024. */}}
{{- define "coxswain.sharedLowPorts" -}}
{{- $ingress := .Values.proxy.shared.ingress -}}
{{- if or (lt (int $ingress.httpPort) 1024) (lt (int $ingress.httpsPort) 1024) -}}true{{- end -}}
{{- end -}}

{{/* Whether to create the GatewayClass (gatewayClass.create: auto, true or false). */}}
{{- define "coxswain.gatewayClassEnabled" -}}
{{- $create := .Values.gatewayClass.create -}}
{{- if eq (toString $create) "auto" -}}
{{- if .Capabilities.APIVersions.Has "gateway.networking.k8s.io/v1/GatewayClass" -}}true{{- end -}}
{{- else if $create -}}true{{- end -}}
{{- end -}}
