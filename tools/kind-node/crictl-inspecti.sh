#!/bin/bash
# A stand-in for `crictl inspecti`, in labkit's test node images only (tools/preload-test-images.sh).
# cri-tools is not on the Go module proxy, so the offline node image has no crictl; kind's
# `kind load docker-image` asks `crictl inspecti IMAGE` for an image's ID and, without an answer,
# imports the image again into every node. This answers that one question from containerd itself:
#   crictl inspecti REF|sha256:ID  ->  {"status": {"id": "sha256:<config digest>", "repoTags": [...]}}
# (exit 1 when the image is not there, like crictl). Every other command says it is not here.
set -euo pipefail
if [[ "${1:-}" != inspecti || $# -lt 2 ]]; then
  echo "crictl: this test node image only has a stand-in for 'crictl inspecti IMAGE' (see $0)" >&2
  exit 1
fi
want="${!#}"
ctr=(ctr --namespace=k8s.io)

# the config digest (the image ID) of a manifest or index digest
config_of() {
  local doc; doc="$("${ctr[@]}" content get "$1" 2>/dev/null)"
  if jq -e '.manifests' >/dev/null <<<"$doc"; then
    local m
    m="$(jq -r '[.manifests[] | select((.platform.os // "linux") == "linux"
                                   and (.platform.architecture // "amd64") == "amd64")][0].digest' <<<"$doc")"
    config_of "$m"
  else
    jq -r '.config.digest' <<<"$doc"
  fi
}

# normalized as the CRI does: docker.io/ and library/ prefixes, :latest
norm() {
  local r="$1"
  [[ "$r" == sha256:* ]] && { echo "$r"; return; }
  [[ "$r" == */* ]] || r="library/$r"
  local first="${r%%/*}"
  [[ "$first" == *.* || "$first" == *:* || "$first" == localhost ]] || r="docker.io/$r"
  [[ "${r##*/}" == *:* || "$r" == *@* ]] || r="$r:latest"
  echo "$r"
}
want="$(norm "$want")"

answer() { jq -n --arg id "$1" --arg tags "$2" '{status: {id: $id, repoTags: ($tags | split(" "))}}'; exit 0; }

if [[ "$want" != sha256:* ]]; then  # by name: one image to look at
  read -r _ref _type digest _rest < <("${ctr[@]}" images ls "name==$want" 2>/dev/null | tail -n +2) || true
  [[ -n "${digest:-}" ]] && answer "$(config_of "$digest")" "$want"
else                                # by ID: every tag of that ID
  tags=""
  while read -r ref _type digest _rest; do
    [[ "$ref" == REF || "$ref" == sha256:* || -z "$ref" ]] && continue
    [[ "$(config_of "$digest")" == "$want" ]] && tags+="${tags:+ }$ref"
  done < <("${ctr[@]}" images ls 2>/dev/null)
  [[ -n "$tags" ]] && answer "$want" "$tags"
fi
echo "crictl: no such image \"$want\" present" >&2
exit 1
