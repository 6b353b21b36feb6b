# Sourced by the tests that load a sanitizer-built libtdpolicy.so into a program that is not
# instrumented (python3, a CMake-built executable). Under --config=asan or tsan the library links
# the sanitizer's runtime, which must be the first library in the process, so it is preloaded,
# with libstdc++ (python3 does not load it before the library, and ASan's __cxa_throw interceptor
# looks for the real one when it starts). For a library built without a sanitizer it does nothing.
#   source tests/testing/preload_sanitizer_runtime.sh && preload_sanitizer_runtime LIBRARY
preload_sanitizer_runtime() {
  local libraries runtime cxx_runtime
  libraries="$(ldd "$1")"
  runtime="$(awk '/lib(asan|tsan)\.so/ { print $3 }' <<<"$libraries")"
  if [[ -z "$runtime" ]]; then return 0; fi
  cxx_runtime="$(awk '/libstdc\+\+\.so/ { print $3 }' <<<"$libraries")"
  export LD_PRELOAD="$runtime${cxx_runtime:+:$cxx_runtime}${LD_PRELOAD:+:$LD_PRELOAD}"
}
