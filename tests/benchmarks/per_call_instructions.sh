#!/usr/bin/env bash
# Instructions per call of the Gaussian actor at batch 1, SDK against the hand-written loop: the
# load-independent figure behind the README's batch-1 table (time on a shared 2-core VM moves by
# more than the gap being measured).
#   tests/benchmarks/per_call_instructions.sh [BAZEL_FLAG...]   # e.g. --copt=-flto=auto --linkopt=-flto=auto
# Builds //tests/benchmarks:probabilistic_benchmark with -c opt -g, then runs each side twice under
# valgrind --tool=callgrind (--benchmark_min_time 2 and 6 s) and divides the difference of the
# per-call function's inclusive cost by the difference of its calls, so that setup and the cold
# first call cancel. The per-call functions: the sequence's TensorDictModuleBase::forward (calls
# counted on ProbabilisticTensorDictSequentialImpl::forward_impl), HandGaussianActor::act and
# HandTensorDictGaussianActor<false>::act (the hand loop writing the same TensorDict entries: the
# container's own share of the gap) and HandTensorDictGaussianActor<true>::act (that loop drawing
# and scoring through a dist::Normal built per step: the container and the distribution object).
# CALLGRIND_ARGS adds valgrind options (e.g. "--cache-sim=yes --branch-sim=yes"); the output
# files stay in $OUT_DIR (default a temporary folder) for callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "per_call_instructions.sh: valgrind is not installed" >&2; exit 1; }

cache="${TDP_BAZEL_DISK_CACHE:-$HOME/.cache/tdpolicy/bazel-disk}"
./bazelw build -c opt --copt=-g --disk_cache="$cache" "$@" //tests/benchmarks:probabilistic_benchmark
bin="$(./bazelw info -c opt "$@" output_path 2>/dev/null)/k8-opt/bin/tests/benchmarks/probabilistic_benchmark"
out="${OUT_DIR:-$(mktemp -d)}"
mkdir -p "$out"

runs=()
for side in Sdk Hand HandTensorDict HandTensorDictNormal; do
  for seconds in 2 6; do
    # shellcheck disable=SC2086
    valgrind --tool=callgrind ${CALLGRIND_ARGS:-} --callgrind-out-file="$out/$side.$seconds.out" \
      --log-file="$out/$side.$seconds.log" "$bin" --benchmark_filter="GaussianActor_$side/1\$" \
      --benchmark_min_time="$seconds" >/dev/null &
    runs+=("$!:$side.$seconds")
  done
done
# A bare `wait` returns 0 whatever the runs did: wait for each, so a failed one stops here.
for run in "${runs[@]}"; do
  wait "${run%%:*}" || { echo "per_call_instructions.sh: the ${run#*:} run failed; see $out/${run#*:}.log" >&2; exit 1; }
done

python3 - "$out" <<'EOF'
import re, subprocess, sys

out = sys.argv[1]

def inclusive(path, function):
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--auto=no", path],
                          capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        if function in line:
            return int(line.split()[0].replace(",", ""))
    sys.exit(f"per_call_instructions.sh: {function} not in {path}")

def calls(path, function):
    # Sums the calls= line after every call site of `function` (cfn= names are compressed: the
    # name follows its id the first time only).
    names, total, counting = {}, 0, False
    for line in open(path, errors="replace"):
        match = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
        if match:
            if match.group(3):
                names[match.group(2)] = match.group(3)
            counting = match.group(1) == "cfn" and function in names.get(match.group(2), "")
        elif counting and line.startswith("calls="):
            total += int(line[len("calls="):].split()[0])
            counting = False
    return total

per_call = {}
for side, cost_fn, call_fn in [("Sdk", "tdp::nn::TensorDictModuleBase::forward(",
                                "ProbabilisticTensorDictSequentialImpl::forward_impl"),
                               ("Hand", "HandGaussianActor::act(", "HandGaussianActor::act("),
                               ("HandTensorDict", "HandTensorDictGaussianActor<false>::act(",
                                "HandTensorDictGaussianActor<false>::act("),
                               ("HandTensorDictNormal", "HandTensorDictGaussianActor<true>::act(",
                                "HandTensorDictGaussianActor<true>::act(")]:
    short, long = f"{out}/{side}.2.out", f"{out}/{side}.6.out"
    n = calls(long, call_fn) - calls(short, call_fn)
    per_call[side] = (inclusive(long, cost_fn) - inclusive(short, cost_fn)) / n
    print(f"{side:20s} {per_call[side]:10.0f} instructions per call ({n} calls apart)")
print(f"ratio {per_call['Sdk'] / per_call['Hand']:.3f}   (SDK over the hand loop)")
print(f"ratio {per_call['HandTensorDict'] / per_call['Hand']:.3f}   (the hand loop writing the TensorDict, over the hand loop)")
print(f"ratio {per_call['HandTensorDictNormal'] / per_call['Hand']:.3f}   (that loop through a dist::Normal, over the hand loop)")
print(f"callgrind files in {out}")
EOF
