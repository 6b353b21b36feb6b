#!/usr/bin/env bash
# Runs c_api_ctypes_test.py with the venv's python3 against the shared library.
# Usage (tests/c/BUILD.bazel): c_api_ctypes_test.sh PYTHON SCRIPT LIBTDPOLICY CARTPOLE_SPEC GRU_SPEC
set -euo pipefail
# Under --config=asan the library links ASan's runtime, which must be the first library in the
# process: python3 is not instrumented, so it is preloaded.
libraries="$(ldd "$3")"
asan_runtime="$(awk '/libasan\.so/ { print $3 }' <<<"$libraries")"
if [[ -n "$asan_runtime" ]]; then export LD_PRELOAD="$asan_runtime${LD_PRELOAD:+:$LD_PRELOAD}"; fi
exec "$1" "$2" "$3" "$4" "$5"
