#!/usr/bin/env bash
# Runs a tdpolicy.serving test file with the serving venv's python inside a private network
# namespace whose only interface is the loopback one, so the KServe server it starts (which binds
# every address) is reachable from this namespace only and nothing leaves the machine.
# Usage (tests/python/BUILD.bazel): serving_test.sh PYTHON LIBTDPOLICY TEST_PY
set -euo pipefail

absolute() { [[ "$1" == /* ]] && echo "$1" || echo "$PWD/$1"; }
python="$(absolute "$1")"
export TDP_LIBRARY="$(absolute "$2")"
test_py="$(absolute "$3")"
# The package's sources (//sdk/python:package_files), as they are in the repository.
export PYTHONPATH="$PWD/sdk/python"
export PYTHONDONTWRITEBYTECODE=1
export TDP_POLICIES="$PWD/policies"
# The server's python loads the library.
source tests/testing/preload_sanitizer_runtime.sh
preload_sanitizer_runtime "$TDP_LIBRARY"

if ! versions="$("$python" -c 'import kserve, tritonclient, google.protobuf as p
from importlib.metadata import version
print("kserve", version("kserve"), "tritonclient", version("tritonclient"), "protobuf", p.__version__)')"; then
  echo "serving_test: $python cannot import kserve and tritonclient" \
    "(./bazelw installs them from third_party/python/serving-requirements.txt)" >&2
  exit 1
fi
echo "serving_test: $versions"

exec unshare --net -- bash -c 'ip link set lo up && exec "$@"' serving_test \
  "$python" "$(dirname "$test_py")/junit_runner.py" "$test_py"
