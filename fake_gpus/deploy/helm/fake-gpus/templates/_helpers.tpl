{{/* The labels of the driver's own objects: the kustomize base's, then Helm's. */}}
{{- define "fake-gpus.labels" -}}
app.kubernetes.io/name: fake-gpus
{{ include "fake-gpus.commonLabels" . }}
{{- end -}}

{{/* What every object gets (the DeviceClasses only these, as in the kustomize base) */}}
{{- define "fake-gpus.commonLabels" -}}
app.kubernetes.io/part-of: dra-labkit
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "fake-gpus.serviceAccountName" -}}fake-gpus-kubelet-plugin{{- end -}}

{{- define "fake-gpus.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* --feature-gates A=true,B=false from the featureGates map (sorted by name) */}}
{{- define "fake-gpus.featureGates" -}}
{{- $gates := list -}}
{{- range $name, $on := .Values.featureGates -}}
{{- $gates = append $gates (printf "%s=%t" $name $on) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}

{{/* the plugin's args after its fixed ones: per-hardware profile, sharing, gates, topology */}}
{{- define "fake-gpus.extraArgs" -}}
{{- $root := .root -}}
{{- $hw := .hw -}}
{{- if $hw }}
- --profile
- {{ required "every hardware entry needs a nodeProfile" $hw.nodeProfile | quote }}
{{- if $hw.migMode }}
- --mig
- {{ $hw.migMode | quote }}
{{- end }}
{{- end }}
{{- $topology := $root.Values.topologyAttributes }}
{{- if and $hw (hasKey $hw "topologyAttributes") }}
{{- $topology = $hw.topologyAttributes }}
{{- end }}
{{- if $topology }}
- --topology-attributes
{{- end }}
{{- if $root.Values.consumableShares }}
- --consumable-shares
- {{ $root.Values.consumableShares | toString | quote }}
{{- end }}
{{- if $root.Values.featureGates }}
- --feature-gates
- {{ include "fake-gpus.featureGates" $root | quote }}
{{- end }}
{{- end -}}
