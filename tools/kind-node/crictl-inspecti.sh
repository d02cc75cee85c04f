#!/bin/bash
# A stand-in for `crictl inspecti`, in labkit's test node images only (tools/preload-test-images.sh).
# cri-tools is not on the Go module proxy, so the offline node image has no crictl; kind's
# `kind load docker-image` asks `crictl inspecti sha256:ID` on every node for every image (kind
# pkg/cluster/nodeutils/util.go ImageTags) and, without an answer, imports the image again into every
# node. This answers that one question from containerd itself:
#   crictl inspecti REF|sha256:ID  ->  {"status": {"id": "sha256:<config digest>", "repoTags": [...]}}
# (exit 1 when the image is not there, like crictl). Every other command says it is not here.
# An image's ID is its config digest, which `ctr images ls` does not show: the manifests (and indexes)
# are read from containerd's content store, all in one jq (a `ctr content get` and two jq per image
# reference cost ~1 CPU-s per question on a node of 22 references, ~45 CPU-s a make test; now ~0.15).
set -euo pipefail
if [[ "${1:-}" != inspecti || $# -lt 2 ]]; then
  echo "crictl: this test node image only has a stand-in for 'crictl inspecti IMAGE' (see $0)" >&2
  exit 1
fi
want="${!#}"
ctr=(ctr --namespace=k8s.io)
# containerd's content store under its root (a kind node's: the default; CONTAINERD_ROOT for the stand-in's test)
BLOBS="${CONTAINERD_ROOT:-/var/lib/containerd}/io.containerd.content.v1.content/blobs"

# "DIGEST CONFIG_DIGEST" for each manifest or index digest given: an index's linux/amd64 manifest's
# config. The blobs are read as files (containerd's default root), else through `ctr content get`.
configs_of() {
  local d files=() missing=0
  for d in "$@"; do
    files+=("$BLOBS/${d/://}"); [[ -r "$BLOBS/${d/://}" ]] || missing=1
  done
  [[ ${#files[@]} -gt 0 ]] || return 0
  local prog='(if $d == "" then input_filename else $d end | split("/") | "\(.[-2]):\(.[-1])") as $id |
    if .manifests then "\($id) index \([.manifests[] | select((.platform.os // "linux") == "linux"
                         and (.platform.architecture // "amd64") == "amd64")][0].digest)"
    else "\($id) config \(.config.digest)" end'
  local out
  if [[ $missing == 0 ]]; then
    out="$(jq -r --arg d "" "$prog" "${files[@]}")"
  else
    out="$(for d in "$@"; do "${ctr[@]}" content get "$d" 2>/dev/null | jq -r --arg d "x/${d/://}" "$prog" || true; done)"
  fi
  local id kind ref children=() line
  declare -A of=()
  while read -r id kind ref; do
    of[$id]="$kind $ref"
    [[ $kind == index ]] && children+=("$ref")
  done <<<"$out"
  declare -A child=()
  if [[ ${#children[@]} -gt 0 ]]; then
    while read -r id ref; do child[$id]=$ref; done < <(configs_of "${children[@]}")
  fi
  for d in "$@"; do
    line="${of[$d]:-}"
    case "$line" in
      "config "*) echo "$d ${line#config }" ;;
      "index "*) if [[ -n "${child[${line#index }]:-}" ]]; then echo "$d ${child[${line#index }]}"; fi ;;
    esac
  done
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
  if [[ -n "${digest:-}" ]]; then
    read -r _ config < <(configs_of "$digest") || true
    [[ -n "${config:-}" ]] && answer "$config" "$want"
  fi
else                                # by ID: every tag of that ID
  refs=() digests=()
  declare -A seen=() config=()
  while read -r ref _type digest _rest; do
    [[ "$ref" == REF || "$ref" == sha256:* || -z "$ref" ]] && continue
    refs+=("$ref $digest")
    [[ -n "${seen[$digest]:-}" ]] || { seen[$digest]=1; digests+=("$digest"); }
  done < <("${ctr[@]}" images ls 2>/dev/null)
  while read -r digest cfg; do [[ -n "$digest" ]] && config[$digest]=$cfg; done < <(configs_of "${digests[@]}")
  tags=""
  for r in "${refs[@]}"; do
    [[ "${config[${r#* }]:-}" == "$want" ]] && tags+="${tags:+ }${r%% *}"
  done
  [[ -n "$tags" ]] && answer "$want" "$tags"
fi
echo "crictl: no such image \"$want\" present" >&2
exit 1
