{{/* The name of everything this release creates. */}}
{{- define "jobferry-manager.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "jobferry-manager.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "jobferry-manager.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "jobferry-manager.certSecret" -}}
{{ include "jobferry-manager.fullname" . }}-webhook-cert
{{- end -}}

{{- define "jobferry-manager.webhookService" -}}
{{ include "jobferry-manager.fullname" . }}-webhook
{{- end -}}

{{/* The inspection API's APIService: its name is its version and group. */}}
{{- define "jobferry-manager.apiService" -}}
v1alpha1.inspection.jobferry.dev
{{- end -}}

{{- define "jobferry-manager.metricsService" -}}
{{ include "jobferry-manager.fullname" . }}-metrics
{{- end -}}

{{- define "jobferry-manager.mutatingWebhook" -}}
{{ include "jobferry-manager.fullname" . }}-opt-in
{{- end -}}

{{- define "jobferry-manager.validatingWebhook" -}}
{{ include "jobferry-manager.fullname" . }}-validate
{{- end -}}

{{/* The reserved namespaces: the clusters' own, this release's, and the configured ones. */}}
{{- define "jobferry-manager.reserved" -}}
{{- $reserved := list "kube-system" "kube-public" "kube-node-lease" .Release.Namespace -}}
{{- range .Values.dispatch.reservedNamespaces }}{{ $reserved = append $reserved . }}{{ end -}}
{{- $reserved | uniq | sortAlpha | toJson -}}
{{- end -}}

{{/* dispatch.namespaceSelector as the label selector string of --dispatch-namespace-selector. */}}
{{- define "jobferry-manager.selectorString" -}}
{{- $parts := list -}}
{{- range $k, $v := .matchLabels }}{{ $parts = append $parts (printf "%s=%s" $k $v) }}{{ end -}}
{{- range .matchExpressions -}}
{{- if eq .operator "In" }}{{ $parts = append $parts (printf "%s in (%s)" .key (join "," .values)) }}
{{- else if eq .operator "NotIn" }}{{ $parts = append $parts (printf "%s notin (%s)" .key (join "," .values)) }}
{{- else if eq .operator "Exists" }}{{ $parts = append $parts .key }}
{{- else if eq .operator "DoesNotExist" }}{{ $parts = append $parts (printf "!%s" .key) }}
{{- end -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}

{{/* The rules of a role controller-gen wrote into files/ from the code's markers. */}}
{{- define "jobferry-manager.generatedRules" -}}
{{- $role := .root.Files.Get .file | fromYaml -}}
{{- toYaml $role.rules -}}
{{- end -}}
