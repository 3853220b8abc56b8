{{/* The name of everything this release creates for the worker binary. */}}
{{- define "jobferry-worker.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "jobferry-worker.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
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
