{{/* Names and labels. */}}
{{- define "agentgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agentgate.fullname" -}}
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

{{- define "agentgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agentgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "agentgate.labels" -}}
helm.sh/chart: {{ include "agentgate.chart" . }}
{{ include "agentgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "agentgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "agentgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "agentgate.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* Whether the pods use PostgreSQL ("true" or ""). */}}
{{- define "agentgate.hasDatabase" -}}
{{- if or .Values.database.url .Values.database.existingSecret }}true{{ end }}
{{- end }}

{{/* Whether the pods use Redis ("true" or ""). */}}
{{- define "agentgate.hasRedis" -}}
{{- if or .Values.redis.url .Values.redis.existingSecret }}true{{ end }}
{{- end }}

{{/* Whether the pods read a config file ("true" or ""). */}}
{{- define "agentgate.hasConfig" -}}
{{- if or .Values.config.content .Values.config.existingConfigMap }}true{{ end }}
{{- end }}

{{/* The Secret the chart creates for what the values hold. */}}
{{- define "agentgate.secretName" -}}
{{- include "agentgate.fullname" . }}
{{- end }}

{{/* Whether that Secret has anything to hold ("true" or ""). */}}
{{- define "agentgate.createSecret" -}}
{{- if or (and .Values.database.url (not .Values.database.existingSecret)) (and .Values.redis.url (not .Values.redis.existingSecret)) (and .Values.apiKeys.keys (not .Values.apiKeys.existingSecret) (not .Values.apiKeys.fromConfig)) }}true{{ end }}
{{- end }}

{{- define "agentgate.platformSecretName" -}}
{{- printf "%s-platforms" (include "agentgate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "agentgate.configMapName" -}}
{{- default (include "agentgate.fullname" .) .Values.config.existingConfigMap }}
{{- end }}

{{- define "agentgate.configMapKey" -}}
{{- if .Values.config.existingConfigMap }}{{ .Values.config.existingConfigMapKey }}{{ else }}agentgate.yaml{{ end }}
{{- end }}

{{/* The settings the chart refuses, each with what to do instead. */}}
{{- define "agentgate.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not (include "agentgate.hasDatabase" .)) }}
{{- fail (printf "\n\nreplicaCount is %d, but several replicas need PostgreSQL: the embedded SQLite store is one gateway per data dir.\nSet database.url (or database.existingSecret), and preferably redis.url, or set replicaCount=1.\n" (int .Values.replicaCount)) }}
{{- end }}
{{- if and (include "agentgate.hasRedis" .) (not (include "agentgate.hasDatabase" .)) }}
{{- fail "\n\nredis is set without database: the Redis queue is for replicas sharing PostgreSQL.\nSet database.url (or database.existingSecret), or unset redis.url and redis.existingSecret.\n" }}
{{- end }}
{{- if not (or .Values.apiKeys.keys .Values.apiKeys.existingSecret .Values.apiKeys.fromConfig) }}
{{- fail "\n\nno API keys: the pods listen on 0.0.0.0 and agentgate serve refuses that without keys.\nSet apiKeys.keys (each at least 16 characters), apiKeys.existingSecret, or apiKeys.fromConfig=true when the config's server.api_keys holds them.\n" }}
{{- end }}
{{- if and .Values.apiKeys.fromConfig (not (include "agentgate.hasConfig" .)) }}
{{- fail "\n\napiKeys.fromConfig is true but there is no config file: set config.content or config.existingConfigMap (with server.api_keys), or give apiKeys.keys.\n" }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled (not (int .Values.metrics.port)) (not (and .Values.serviceMonitor.authorization.secretName .Values.serviceMonitor.authorization.secretKey)) }}
{{- fail "\n\nserviceMonitor is enabled, but /metrics on the API port needs a key.\nSet serviceMonitor.authorization.secretName and secretKey (a Secret key holding one API key), or serve /metrics on its own port: server.metrics_addr: 0.0.0.0:9090 in the config and metrics.port=9090.\n" }}
{{- end }}
{{- if and .Values.persistence.enabled (include "agentgate.hasDatabase" .) }}
{{- fail "\n\npersistence.enabled is for the embedded SQLite store; with database set the data lives in PostgreSQL. Set persistence.enabled=false.\n" }}
{{- end }}
{{- end }}
