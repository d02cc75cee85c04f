#!/usr/bin/env bash
# Regenerate the Python gRPC modules in gen/ from protos/ (needs grpcio-tools).
# The generated files are committed so users do not need grpcio-tools.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
rm -f "$here"/gen/*_pb2*.py
"$python" -m grpc_tools.protoc -I "$here/protos" \
  --python_out="$here/gen" --grpc_python_out="$here/gen" \
  "$here"/protos/*.proto
# protoc writes absolute imports ("import dra_v1_pb2"); make them package-relative.
for f in "$here"/gen/*_pb2_grpc.py; do
  sed -i -E 's/^import ([a-z0-9_]+_pb2) as /from . import \1 as /' "$f"
done
touch "$here/gen/__init__.py"
