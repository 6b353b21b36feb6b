#!/usr/bin/env bash
# Runs serving_benchmark.py with the serving venv's python inside a private network namespace (only
# lo), where the KServe server it starts cannot be reached from, or reach, anything else.
# Usage (tests/benchmarks/BUILD.bazel): serving_benchmark.sh PYTHON LIBTDPOLICY SCRIPT SPEC [options]
set -euo pipefail
absolute() { [[ "$1" == /* ]] && echo "$1" || echo "$PWD/$1"; }
python="$(absolute "$1")"
library="$(absolute "$2")"
script="$(absolute "$3")"
spec="$(absolute "$4")"
shift 4
export PYTHONPATH="$PWD/sdk/python"
export PYTHONDONTWRITEBYTECODE=1
exec unshare --net -- bash -c 'ip link set lo up && exec "$@"' serving_benchmark \
  "$python" "$script" --library "$library" --spec "$spec" "$@"
