#!/usr/bin/env bash
# Installs tdpolicy for builds outside this workspace:
#   ./bazelw run //:install -- --prefix=DIR
# writes
#   DIR/lib/libtdpolicy.so.VERSION, libtdpolicy.so.SOVERSION and libtdpolicy.so (links)
#   DIR/include/tdpolicy/sdk/...               the public headers (sdk/c/tdp_c.h: the C API)
#   DIR/include/tdpolicy/tdpolicy/*.pb.h        the generated protobuf headers
#   DIR/lib/tdpolicy/libtorch/include/          links to the LibTorch headers the library was built
#                                               against (only ATen, c10, caffe2, torch: the wheel's
#                                               include/ also bundles protobuf headers that would
#                                               shadow Debian's)
#   DIR/lib/cmake/tdpolicy/tdpolicyConfig.cmake (+ ConfigVersion)  find_package(tdpolicy)
#   DIR/lib/pkgconfig/tdpolicy.pc (C++) and tdpolicy-c.pc (the C API alone)
# A relative DIR is taken from the directory `bazel run` was called in.
set -euo pipefail

usage() { echo "usage: ./bazelw run //:install -- --prefix=DIR" >&2; }

prefix=""
for arg in "$@"; do
  case "$arg" in
    --prefix=*) prefix="${arg#--prefix=}" ;;
    -h | --help) usage; exit 0 ;;
    *) echo "install: unknown argument '$arg'" >&2; usage; exit 2 ;;
  esac
done
if [[ -z "$prefix" ]]; then
  echo "install: --prefix=DIR is required" >&2
  usage
  exit 2
fi
if [[ "$prefix" != /* ]]; then
  prefix="${BUILD_WORKING_DIRECTORY:-$PWD}/$prefix"
fi

# This script's runfiles (under `bazel run`, or as the data of a test).
runfiles="${RUNFILES_DIR:-${TEST_SRCDIR:-$0.runfiles}}"
root="$runfiles/tdpolicy"
if [[ ! -f "$root/sdk/install/build_info.sh" ]]; then
  echo "install: cannot find the runfiles of //sdk/install (looked in $runfiles); run it with ./bazelw run //:install" >&2
  exit 1
fi
# version, soversion, libtorch_home
source "$root/sdk/install/build_info.sh"
if [[ ! -f "$libtorch_home/lib/libtorch_cpu.so" ]]; then
  echo "install: the LibTorch the library was built with is gone ($libtorch_home/lib/libtorch_cpu.so);" \
    "rebuild with ./bazelw" >&2
  exit 1
fi

lib="$prefix/lib"
mkdir -p "$lib/cmake/tdpolicy" "$lib/pkgconfig" "$lib/tdpolicy/libtorch/include" "$prefix/include/tdpolicy"

rm -f "$lib/libtdpolicy.so.$version"
cp "$root/sdk/install/libtdpolicy.so" "$lib/libtdpolicy.so.$version"
chmod 0755 "$lib/libtdpolicy.so.$version"
ln -sfn "libtdpolicy.so.$version" "$lib/libtdpolicy.so.$soversion"
ln -sfn "libtdpolicy.so.$soversion" "$lib/libtdpolicy.so"

headers=0
rm -rf "$prefix/include/tdpolicy/sdk" "$prefix/include/tdpolicy/tdpolicy"
while IFS= read -r header; do
  # Generated protobuf headers are included as "tdpolicy/spec.pb.h" (proto/ is their root).
  destination="$prefix/include/tdpolicy/${header#proto/}"
  mkdir -p "$(dirname "$destination")"
  cp "$root/$header" "$destination"
  chmod 0644 "$destination"
  headers=$((headers + 1))
done <"$root/sdk/install/headers.txt"

for tree in ATen c10 caffe2 torch; do
  ln -sfn "$libtorch_home/include/$tree" "$lib/tdpolicy/libtorch/include/$tree"
done

substitute() {
  sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" -e "s|@SOVERSION@|$soversion|g" \
    -e "s|@LIBTORCH_HOME@|$libtorch_home|g" "$root/sdk/install/$1" >"$2"
}
substitute tdpolicyConfig.cmake.in "$lib/cmake/tdpolicy/tdpolicyConfig.cmake"
substitute tdpolicyConfigVersion.cmake.in "$lib/cmake/tdpolicy/tdpolicyConfigVersion.cmake"
substitute tdpolicy.pc.in "$lib/pkgconfig/tdpolicy.pc"
substitute tdpolicy-c.pc.in "$lib/pkgconfig/tdpolicy-c.pc"

echo "installed tdpolicy $version into $prefix: lib/libtdpolicy.so.$version, $headers headers," \
  "lib/cmake/tdpolicy, lib/pkgconfig/{tdpolicy,tdpolicy-c}.pc (LibTorch: $libtorch_home)"
