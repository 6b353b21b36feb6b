#!/usr/bin/env bash
# The sanitizer runs that CI does not do (each rebuilds the SDK in its own output folder: on the
# 2-core CI machine that does not fit beside .ci/run's 45 minutes):
#   1. ./bazelw test --config=asan TARGETS   (gcc, ASan + UBSan, -c dbg)
#   2. ./bazelw test --config=tsan TARGETS   (gcc's TSan; the soak runs TDP_SOAK_SECONDS, default 5)
# TARGETS default to the whole suite, //tests/...; each run prints how long it took. Exit status
# non-zero when either fails.
#   tests/sanitize.sh                         # the whole test suite under ASan, then under TSan
#   tests/sanitize.sh //tests/actor:actor_soak_test //tests/actor:batching_actor_test
set -uo pipefail
cd "$(dirname "$0")/.."
cache="${TDP_BAZEL_DISK_CACHE:-$HOME/.cache/tdpolicy/bazel-disk}"
targets=("$@")
if ((${#targets[@]} == 0)); then targets=(//tests/...); fi

start=$SECONDS
./bazelw test --config=asan --disk_cache="$cache" "${targets[@]}"
asan=$?
echo "sanitize: ASan + UBSan on ${targets[*]}: exit $asan in $((SECONDS - start)) s" >&2

start=$SECONDS
./bazelw test --config=tsan --disk_cache="$cache" --test_env=TDP_SOAK_SECONDS="${TDP_SOAK_SECONDS:-5}" \
  "${targets[@]}"
tsan=$?
echo "sanitize: TSan on ${targets[*]}: exit $tsan in $((SECONDS - start)) s" >&2
((asan == 0 && tsan == 0))
