#!/usr/bin/env bash
# Runs c_api_ctypes_test.py with the venv's python3 against the shared library.
# Usage (tests/c/BUILD.bazel): c_api_ctypes_test.sh PYTHON SCRIPT LIBTDPOLICY CARTPOLE_SPEC GRU_SPEC
set -euo pipefail
# Under --config=asan or tsan the library links the sanitizer's runtime, which must be the first
# library in the process: python3 is not instrumented, so the runtime is preloaded, with libstdc++
# (python3 does not load it before the library, and the runtime's __cxa_throw interceptor looks
# for the real one when it starts).
libraries="$(ldd "$3")"
sanitizer_runtime="$(awk '/lib(asan|tsan)\.so/ { print $3 }' <<<"$libraries")"
if [[ -n "$sanitizer_runtime" ]]; then
  cxx_runtime="$(awk '/libstdc\+\+\.so/ { print $3 }' <<<"$libraries")"
  export LD_PRELOAD="$sanitizer_runtime${cxx_runtime:+:$cxx_runtime}${LD_PRELOAD:+:$LD_PRELOAD}"
fi
exec "$1" "$2" "$3" "$4" "$5"
