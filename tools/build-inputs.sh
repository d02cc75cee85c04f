# Sourced by the build scripts of the Go oracles: is a cached binary still the one its inputs make?
# A digest of the inputs is kept beside the binary (<binary>.inputs). A digest, not mtimes: a fresh
# clone's files are all newer than the cache.

# inputs_digest LABEL DIR FILE...: a digest of LABEL (left out when empty), every file under DIR
# (path relative to DIR, and content) and the content of each FILE.
inputs_digest() {
  local label=$1 dir=$2 f
  shift 2
  { [[ -z "$label" ]] || echo "$label"
    find "$dir" -type f -print0 | sort -z | xargs -0 sha256sum | sed "s|$dir/||"
    for f in "$@"; do sha256sum < "$f"; done
  } | sha256sum | cut -c1-32
}

# built_from BINARY DIGEST: the binary exists and was built from inputs with this digest.
built_from() {
  [[ -x "$1" && "$(cat "$1.inputs" 2>/dev/null)" == "$2" ]]
}
