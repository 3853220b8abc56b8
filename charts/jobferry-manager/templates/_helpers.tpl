{{/* The name of everything this release creates: fullnameOverride, else
the release's name with the chart's (or nameOverride), once. At most 52
characters: objects add suffixes such as -webhook-cert. */}}
{{- define "jobferry-manager.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The manager's ServiceAccount: serviceAccount.name, else the fullname. */}}
{{- define "jobferry-manager.serviceAccountName" -}}
{{- default (include "jobferry-manager.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Every object's labels. app.kubernetes.io/name stays the chart's
whatever nameOverride says: kubectl jobferry finds the manager's pods by it. */}}
{{- define "jobferry-manager.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
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
