#!/usr/bin/env bash
# Runs remote_actor_e2e_test (a gtest binary that starts `python -m tdpolicy.serving` itself)
# inside a private network namespace whose only interface is loopback: KServe binds every address,
# and here every address is this namespace's loopback, so nothing can reach it or leave the machine.
# Usage (tests/actor/BUILD.bazel): remote_actor_e2e_test.sh RUN_GTEST SERVING_PYTHON LIBTDPOLICY GTEST_BINARY
set -euo pipefail

absolute() { [[ "$1" == /* ]] && echo "$1" || echo "$PWD/$1"; }
run_gtest="$(absolute "$1")"
export TDP_SERVING_PYTHON="$(absolute "$2")"
export TDP_LIBRARY="$(absolute "$3")"
binary="$(absolute "$4")"
# The package's sources (//sdk/python:package_files) and the specs, as they are in the repository.
export PYTHONPATH="$PWD/sdk/python"
export PYTHONDONTWRITEBYTECODE=1
export TDP_POLICIES="$PWD/policies"
# The servers' python loads the library.
source tests/testing/preload_sanitizer_runtime.sh
preload_sanitizer_runtime "$TDP_LIBRARY"

if ! "$TDP_SERVING_PYTHON" -c 'import kserve, tritonclient' 2>/dev/null; then
  echo "remote_actor_e2e_test: $TDP_SERVING_PYTHON cannot import kserve" \
    "(./bazelw installs it from third_party/python/serving-requirements.txt)" >&2
  exit 1
fi

# run_gtest.sh (outside the namespace) fails when no test ran; gtest writes $XML_OUTPUT_FILE for
# CI's count. Inside, the binary is the namespace's only process until it starts servers.
exec "$run_gtest" unshare --net -- bash -c 'ip link set lo up && exec "$0"' "$binary"
