#!/usr/bin/env bash
# Installs tdpolicy into a scratch prefix, checks the layout, builds samples/cmake_consumer with
# CMake's find_package(tdpolicy), the C sample with pkg-config's tdpolicy-c and the C++ simulator
# with pkg-config's tdpolicy, and runs them.
# Usage (tests/install/BUILD.bazel): cmake_consumer_test.sh INSTALL CMAKELISTS C_SAMPLE CARTPOLE_SPEC GRU_SPEC
set -euo pipefail

install="$1"
source_dir="$(dirname "$2")"
c_sample="$3"
cartpole="$(realpath "$4")"
gru="$(realpath "$5")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
prefix="$tmp/prefix"
rm -rf "$prefix" "$tmp/build"

start=$SECONDS
"$install" --prefix="$prefix"
for file in lib/libtdpolicy.so.0.1.0 lib/libtdpolicy.so.0 lib/libtdpolicy.so include/tdpolicy/sdk/c/tdp_c.h \
  include/tdpolicy/sdk/actor/actor.h include/tdpolicy/sdk/nn/tensordict_module_internal.h \
  include/tdpolicy/tdpolicy/spec.pb.h include/tdpolicy/tdpolicy/tensor.pb.h \
  lib/cmake/tdpolicy/tdpolicyConfig.cmake lib/cmake/tdpolicy/tdpolicyConfigVersion.cmake \
  lib/pkgconfig/tdpolicy.pc lib/pkgconfig/tdpolicy-c.pc lib/tdpolicy/libtorch/include/ATen/ATen.h; do
  if [[ ! -e "$prefix/$file" ]]; then
    echo "FAIL: the install has no $file" >&2
    exit 1
  fi
done
# sdk/policy/kinds/ (the table of module kinds, the validation context) is private: its headers
# are in the library's srcs, not its hdrs.
if [[ -e "$prefix/include/tdpolicy/sdk/policy/kinds" ]]; then
  echo "FAIL: private headers (sdk/policy/kinds/) were installed" >&2
  exit 1
fi
soname="$(objdump -p "$prefix/lib/libtdpolicy.so.0.1.0" | awk '/SONAME/ {print $2}')"
if [[ "$soname" != "libtdpolicy.so.0" ]]; then
  echo "FAIL: libtdpolicy.so.0.1.0 has soname '$soname', expected libtdpolicy.so.0" >&2
  exit 1
fi
echo "install: $((SECONDS - start)) s"

start=$SECONDS
cmake -S "$source_dir" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release
cmake --build "$tmp/build" -j 2
echo "cmake configure and build: $((SECONDS - start)) s"

# The binaries load the installed library (not a build-tree copy). ldd's output is read whole:
# `ldd | grep -q` under pipefail fails at random when grep exits first and ldd gets SIGPIPE.
libraries="$(ldd "$tmp/build/cartpole_sim")"
if [[ "$libraries" != *"$prefix/lib/libtdpolicy.so.0"* ]]; then
  echo "FAIL: cartpole_sim does not load $prefix/lib/libtdpolicy.so.0:" >&2
  echo "$libraries" >&2
  exit 1
fi

# The executables are built by plain CMake, not instrumented.
source tests/testing/preload_sanitizer_runtime.sh
preload_sanitizer_runtime "$tmp/build/cartpole_sim"

expect() {  # expect PATTERN COMMAND...: runs COMMAND, prints its output, fails unless PATTERN is in it
  local pattern="$1"
  shift
  local output
  output="$("$@" 2>&1)" || { echo "FAIL: $* exited with $?: $output" >&2; exit 1; }
  echo "$output"
  if ! grep -q -- "$pattern" <<<"$output"; then
    echo "FAIL: '$*' did not print '$pattern'" >&2
    exit 1
  fi
}
expect "on CartPole: 10 episodes in 8 environments, return mean" "$tmp/build/cartpole_sim" "$cartpole" 10
expect "10 episodes in 8 environments" "$tmp/build/c_policy" "$cartpole" 10
expect "out hidden           float32  \[32\]" "$tmp/build/c_policy" "$gru" 5

# A missing spec: the C++ status and the C API's message both name the file.
if output="$("$tmp/build/cartpole_sim" "$tmp/missing.pbtxt" 2>&1)"; then
  echo "FAIL: cartpole_sim succeeded on a missing spec" >&2
  exit 1
fi
grep -q "missing.pbtxt" <<<"$output" || { echo "FAIL: the error does not name the file: $output" >&2; exit 1; }

# pkg-config: the C sample with the C API's flags only.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -std=c11 -D_POSIX_C_SOURCE=200809L "$c_sample" -o "$tmp/c_policy_pc" $(pkg-config --cflags --libs tdpolicy-c) \
  -Wl,-rpath,"$prefix/lib" -lm
expect "3 episodes in 8 environments" "$tmp/c_policy_pc" "$cartpole" 3
# pkg-config: the C++ simulator with tdpolicy.pc (LibTorch, Abseil, protobuf, spdlog).
start=$SECONDS
c++ -std=c++17 "$source_dir/cartpole_sim.cc" -o "$tmp/cartpole_sim_pc" $(pkg-config --cflags --libs tdpolicy) \
  -Wl,-rpath,"$prefix/lib"
echo "pkg-config C++ build: $((SECONDS - start)) s"
expect "on CartPole: 3 episodes in 8 environments" "$tmp/cartpole_sim_pc" "$cartpole" 3
echo "PASS"
