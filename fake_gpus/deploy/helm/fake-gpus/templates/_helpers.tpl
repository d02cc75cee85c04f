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

{{/* hardware[i]'s DaemonSet name, fake-gpus-kubelet-plugin-<name>, cut to 63 characters as Helm cuts
     object names (`helm create`'s fullname: trunc 63 | trimSuffix "-"). The name is also the value of
     label fake-gpus.dev/hardware, so it must be a DNS label. Call: (dict "i" $i "hw" $hw) */}}
{{- define "fake-gpus.hardwareDaemonSet" -}}
{{- $name := required (printf "hardware[%d]: every hardware entry needs a name" (int .i)) .hw.name -}}
{{- if or (gt (len $name) 63) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name)) -}}
{{- fail (printf "hardware[%d].name %q: must be a DNS label (at most 63 lower-case letters, digits, '-'; a letter or digit first and last)" (int .i) $name) -}}
{{- end -}}
{{- printf "fake-gpus-kubelet-plugin-%s" $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* What values.schema.json cannot say, checked before anything is applied: every hardware entry
     names a DaemonSet of its own (two names alike in their first 38 characters give the same cut
     name, and the second DaemonSet would replace the first); sharing needs its gate (the plugin
     refuses --consumable-shares without it, at start, on every node); the profiles fit in a
     ConfigMap (the API server's limit: 1 MiB of data). */}}
{{- define "fake-gpus.checkValues" -}}
{{- $prefix := len "fake-gpus-kubelet-plugin-" -}}
{{- $seen := dict -}}
{{- range $i, $hw := .Values.hardware -}}
{{- $ds := include "fake-gpus.hardwareDaemonSet" (dict "i" $i "hw" $hw) -}}
{{- with get $seen $ds -}}
{{- fail (printf "hardware[%d].name %q and hardware[%d].name %q both give DaemonSet %q (names are cut to 63 characters): give each entry a name of its own within its first %d characters" (int .i) .name $i $hw.name $ds (sub 63 $prefix)) -}}
{{- end -}}
{{- $_ := set $seen $ds (dict "i" $i "name" $hw.name) -}}
{{- end -}}
{{- $shares := toString (.Values.consumableShares | default "") -}}
{{- if and $shares (ne $shares "disabled") (not (get (.Values.featureGates | default dict) "ConsumableShares")) -}}
{{- fail (printf "consumableShares %q needs featureGates.ConsumableShares=true (NVIDIA's driver refuses --consumable-shares %s without that gate)" $shares $shares) -}}
{{- end -}}
{{- $size := 0 -}}
{{- range $key, $profile := .Values.extraProfiles -}}
{{- $size = add $size (len $profile) -}}
{{- end -}}
{{- if gt (int $size) 1048576 -}}
{{- fail (printf "extraProfiles: %d bytes of profiles in all; ConfigMap fake-gpus-profiles holds at most 1048576 (1 MiB, the API server's limit)" (int $size)) -}}
{{- end -}}
{{- end -}}

{{/* the plugin's args after its fixed ones: per-hardware profile, sharing, gates, topology */}}
{{- define "fake-gpus.extraArgs" -}}
{{- $root := .root -}}
{{- $hw := .hw -}}
{{- if $hw }}
- --profile
- {{ required (printf "hardware[%d]: every hardware entry needs a nodeProfile" (int .i)) $hw.nodeProfile | quote }}
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
