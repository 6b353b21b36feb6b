#!/usr/bin/env bash
# Runs c_api_ctypes_test.py with the venv's python3 against the shared library.
# Usage (tests/c/BUILD.bazel): c_api_ctypes_test.sh PYTHON SCRIPT LIBTDPOLICY CARTPOLE_SPEC GRU_SPEC
set -euo pipefail
source tests/testing/preload_sanitizer_runtime.sh
preload_sanitizer_runtime "$3"
exec "$1" "$2" "$3" "$4" "$5"
