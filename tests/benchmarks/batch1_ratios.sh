#!/usr/bin/env bash
# The batch-1 time figure behind the README's probabilistic rows: the four GaussianActor benchmarks
# of probabilistic_benchmark at batch 1 (hand loop, + TensorDict, + dist::Normal, SDK), each
# process running them in 11 randomly interleaved repetitions, pinned to one core, and the median
# over processes of each benchmark's ratio to the hand loop in that process. Single processes of
# one binary spread by several points on a shared VM (heap and code layout, neighbours), so a
# figure needs tens of processes, and two binaries are compared in alternated processes.
#   tests/benchmarks/batch1_ratios.sh [PROCESSES] [BINARY_A [BINARY_B]]
# Without binaries it builds //tests/benchmarks:probabilistic_benchmark with -c opt and runs that
# (30 processes by default). With two it alternates them (A, B, A, B, ...) and prints each one's.
# CORE picks the core (default 1). Run it on an idle machine: load moves the ratios more than
# the gaps being measured.
set -euo pipefail
cd "$(dirname "$0")/../.."
processes="${1:-30}"
shift || true
binaries=("$@")
if [[ ${#binaries[@]} -eq 0 ]]; then
  cache="${TDP_BAZEL_DISK_CACHE:-$HOME/.cache/tdpolicy/bazel-disk}"
  ./bazelw build -c opt --disk_cache="$cache" //tests/benchmarks:probabilistic_benchmark
  binaries=("$(./bazelw info -c opt output_path 2>/dev/null)/k8-opt/bin/tests/benchmarks/probabilistic_benchmark")
fi
[[ "$processes" =~ ^[1-9][0-9]*$ ]] || { echo "batch1_ratios.sh: PROCESSES must be a positive integer, got '$processes'" >&2; exit 2; }
for binary in "${binaries[@]}"; do
  [[ -x "$binary" ]] || { echo "batch1_ratios.sh: $binary is not an executable benchmark binary" >&2; exit 2; }
done
command -v taskset >/dev/null || { echo "batch1_ratios.sh: taskset (util-linux) is not installed" >&2; exit 1; }

out="$(mktemp -d)"
for ((i = 0; i < processes; ++i)); do
  for side in "${!binaries[@]}"; do
    OPENBLAS_NUM_THREADS=1 taskset -c "${CORE:-1}" "${binaries[$side]}" \
      --benchmark_filter='GaussianActor_.*/1$' --benchmark_enable_random_interleaving=true \
      --benchmark_repetitions=11 --benchmark_min_time=0.1 \
      --benchmark_out="$out/$side.$i.json" --benchmark_out_format=json >/dev/null 2>"$out/$side.$i.log" ||
      { cat "$out/$side.$i.log" >&2; echo "batch1_ratios.sh: ${binaries[$side]} failed" >&2; exit 1; }
  done
done

python3 - "$out" "${binaries[@]}" <<'PY'
import glob, json, statistics, sys

out, binaries = sys.argv[1], sys.argv[2:]
for side, binary in enumerate(binaries):
    ratios, times = {}, {}
    for path in sorted(glob.glob(f"{out}/{side}.*.json")):
        medians = {b["run_name"]: b["real_time"] for b in json.load(open(path))["benchmarks"]
                   if b.get("aggregate_name") == "median"}
        hand = medians["GaussianActor_Hand/1"]
        for name, time in medians.items():
            ratios.setdefault(name, []).append(time / hand)
            times.setdefault(name, []).append(time)
    print(f"{binary}: {len(ratios['GaussianActor_Hand/1'])} processes")
    for name in ["GaussianActor_Hand/1", "GaussianActor_HandTensorDict/1", "GaussianActor_HandTensorDictNormal/1",
                 "GaussianActor_Sdk/1"]:
        r = ratios[name]
        print(f"  {name:38s} {statistics.median(times[name]) / 1000:7.2f} us   ratio {statistics.median(r):.3f}"
              f"   ({min(r):.3f} to {max(r):.3f} between processes)")
PY
