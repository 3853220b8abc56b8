{{/* The name of everything this release creates for the worker binary:
fullnameOverride, else the release's name with the chart's (or
nameOverride), once. */}}
{{- define "jobferry-worker.fullname" -}}
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

{{/* The worker binary's ServiceAccount: serviceAccount.name, else the
fullname. (The manager's identity here is managerIdentity's.) */}}
{{- define "jobferry-worker.serviceAccountName" -}}
{{- default (include "jobferry-worker.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "jobferry-worker.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "jobferry-worker.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The rules of a role controller-gen wrote into files/ from the code's markers. */}}
{{- define "jobferry-worker.generatedRules" -}}
{{- $role := .root.Files.Get .file | fromYaml -}}
{{- toYaml $role.rules -}}
{{- end -}}

{{/* What `kubectl jobferry describe` and `logs` read through the manager's
identity (managerIdentity.allowInspection), generated from the plugin's code. */}}
{{- define "jobferry-worker.inspectionRules" -}}
{{ include "jobferry-worker.generatedRules" (dict "root" . "file" "files/rbac-inspection.yaml") }}
{{- end -}}
