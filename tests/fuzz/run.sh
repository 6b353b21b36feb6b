#!/usr/bin/env bash
# Fuzzes every libFuzzer target of tests/fuzz for a bounded time, then prints, per target, the
# executions done and the crashers found.
#   tests/fuzz/run.sh SECONDS [FUZZER...]     # e.g. tests/fuzz/run.sh 600 (split evenly)
# Builds with clang (./bazelw build --config=fuzz: ASan + UBSan + libFuzzer, see .bazelrc). Each
# target starts from its seed corpus (the committed policies/ and tests/fuzz/corpus/) plus what
# earlier runs found (runs/fuzz/corpus/<fuzzer>/, git-ignored), and writes crashers to
# runs/fuzz/crashers/<fuzzer>/. A target that crashes is restarted for the rest of its time.
# Options: -malloc_limit_mb=256 (a single allocation above 256 MiB is a finding: the fuzz entry
# points load under small limits, fuzz_common.h), -rss_limit_mb=4096, -timeout=20 s per input.
# Exit status 1 when any crasher was found: copy each into tests/fuzz/regressions/<fuzzer>/,
# fix it, and //tests/fuzz:<fuzzer>_replay_test replays it from then on.
set -uo pipefail
cd "$(dirname "$0")/../.."

if [[ $# -lt 1 || ! "$1" =~ ^[0-9]+$ || "$1" -lt 1 ]]; then
  echo "usage: tests/fuzz/run.sh SECONDS [FUZZER...]" >&2
  exit 2
fi
total=$1
shift
all=(spec_text_fuzzer spec_binary_fuzzer spec_json_fuzzer params_fuzzer json_input_fuzzer)
targets=("$@")
if [[ $# -eq 0 ]]; then targets=("${all[@]}"); fi

seeds_of() {
  case "$1" in
    spec_text_fuzzer) echo "policies policies/pytorch" ;;
    spec_binary_fuzzer) echo "tests/fuzz/corpus/spec_binary" ;;
    spec_json_fuzzer) echo "tests/fuzz/corpus/spec_json" ;;
    params_fuzzer) echo "tests/fuzz/corpus/params" ;;
    json_input_fuzzer) echo "tests/fuzz/corpus/json_input" ;;
    *) echo "run.sh: unknown fuzzer $1 (one of: ${all[*]})" >&2; return 1 ;;
  esac
}
for t in "${targets[@]}"; do seeds_of "$t" >/dev/null || exit 2; done

cache="${TDP_BAZEL_DISK_CACHE:-$HOME/.cache/tdpolicy/bazel-disk}"
labels=()
for t in "${targets[@]}"; do labels+=("//tests/fuzz:$t"); done
./bazelw build --config=fuzz --disk_cache="$cache" "${labels[@]}" || exit 1
bin="$(./bazelw info --config=fuzz bazel-bin 2>/dev/null)/tests/fuzz"

export ASAN_OPTIONS="detect_leaks=0:detect_odr_violation=0:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
per=$((total / ${#targets[@]}))
((per < 1)) && per=1
report=()
found_any=0
for t in "${targets[@]}"; do
  corpus="runs/fuzz/corpus/$t"
  crashers="runs/fuzz/crashers/$t"
  mkdir -p "$corpus" "$crashers"
  log="runs/fuzz/$t.log"
  : >"$log"
  executions=0
  runs=0
  deadline=$((SECONDS + per))
  while ((SECONDS < deadline && runs < 20)); do
    left=$((deadline - SECONDS))
    # shellcheck disable=SC2046
    "$bin/$t" -max_total_time="$left" -malloc_limit_mb=256 -rss_limit_mb=4096 -timeout=20 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$crashers/" "$corpus" $(seeds_of "$t") >>"$log" 2>&1
    status=$?
    runs=$((runs + 1))
    n=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
    executions=$((executions + ${n:-0}))
    # The log accumulates: mark what was counted so the next run's figure is its own.
    echo "run.sh: counted ${n:-0} executions (exit $status)" >>"$log"
    sed -i 's/stat::number_of_executed_units/counted::number_of_executed_units/' "$log"
    ((status == 0)) && break
  done
  found=$(find "$crashers" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  ((found > 0)) && found_any=1
  report+=("$(printf '%-20s %12d executions in %4d s, %d crashers (%s)' "$t" "$executions" "$per" "$found" "$crashers")")
done
echo "fuzz results (log per target: runs/fuzz/<fuzzer>.log):"
printf '  %s\n' "${report[@]}"
exit $found_any
