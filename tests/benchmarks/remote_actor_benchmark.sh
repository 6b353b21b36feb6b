#!/usr/bin/env bash
# Runs remote_actor_benchmark (which starts `python -m tdpolicy.serving` itself) inside a private
# network namespace whose only interface is loopback: KServe binds every address.
# Usage (tests/benchmarks/BUILD.bazel, bazel run): remote_actor_benchmark.sh SERVING_PYTHON LIBTDPOLICY
#   BINARY [BENCHMARK FLAGS...]
set -euo pipefail

absolute() { [[ "$1" == /* ]] && echo "$1" || echo "$PWD/$1"; }
export TDP_SERVING_PYTHON="$(absolute "$1")"
export TDP_LIBRARY="$(absolute "$2")"
binary="$(absolute "$3")"
shift 3
export PYTHONPATH="$PWD/sdk/python"
export PYTHONDONTWRITEBYTECODE=1
export TDP_POLICIES="$PWD/policies"
if [[ $(id -u) -ne 0 ]]; then
  echo "remote_actor_benchmark: unshare -n needs root (the server must not listen beyond loopback)" >&2
  exit 1
fi
exec unshare --net -- bash -c 'ip link set lo up && exec "$@"' remote_actor_benchmark "$binary" "$@"
