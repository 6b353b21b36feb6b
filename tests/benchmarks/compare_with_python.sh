#!/usr/bin/env bash
# The C++ actor benchmark and its Python tensordict peer in one run, and one table of the ratios.
#
#   ./bazelw run -c opt //tests/benchmarks:compare_with_python             # from the repo root
#   ./bazelw run -c opt //tests/benchmarks:compare_with_python -- --quick  # 3 repetitions, faster
#   tests/benchmarks/compare_with_python.sh [flags]                        # the same, without bazel run
#
# 1. actor_benchmark (tests/benchmarks/actor_benchmark.cc): the SDK's Actor::act and the same
#    computation written by hand in LibTorch, CartPole categorical and Pendulum tanh-Gaussian at
#    batch 1, 256 and 4096, with the flags the README uses (OPENBLAS_NUM_THREADS=1,
#    --benchmark_repetitions=9 --benchmark_enable_random_interleaving=true), JSON to a file.
# 2. python_peer.py: the same actors in tensordict.nn / TorchRL in the project's venv, eager and
#    torch.compile'd (a compile that fails is reported in the table, not fatal), same batches,
#    same number of interleaved repetitions.
# 3. One table: CPU time per call (median) for C++ SDK, C++ by hand, Python eager, Python
#    compiled, and Python / C++ SDK; then the same as env steps per second.
# The two run one after the other, never at the same time. Run on a quiet machine: on a loaded
# one only the ratios mean much, and even they move by 10-20%.
#
# Flags:
#   --repetitions=N   repetitions on both sides (default 9)
#   --quick           --repetitions=3 and shorter Python repetitions (a smoke run)
#   --no-compile      Python eager only
#   --out=DIR         keep cpp.json, python.json and table.md in DIR (default: a temporary folder)
# Environment: TDP_VENV (the venv, default $HOME/.cache/tdpolicy/venv) when run without bazel;
# TDP_DEFAULT_MALLOC=1 leaves glibc's malloc untuned on both sides (see benchmark_main.cc).
#
# Under `bazel run` the benchmark binary, the interpreter and the script come as runfiles (the
# arguments BUILD.bazel passes first); run directly, it builds //tests/benchmarks:actor_benchmark
# with ./bazelw build -c opt and runs the binary from the -c opt output tree.
set -euo pipefail

start_dir="$PWD"
from_bazel=false
if [[ "${1:-}" == --bazel-runfiles ]]; then
  # From the sh_binary: --bazel-runfiles BENCHMARK PYTHON PEER, relative to the runfiles root
  # (the working directory of `bazel run`, which also holds policies/).
  from_bazel=true
  benchmark="$PWD/$2" python="$PWD/$3" peer="$PWD/$4"
  shift 4
fi

repetitions=9
peer_flags=()
out=""
for arg in "$@"; do
  case "$arg" in
    --repetitions=*) repetitions="${arg#*=}" ;;
    --quick) repetitions=3; peer_flags+=(--min-time=0.05 --warmup=0.1) ;;
    --no-compile) peer_flags+=(--no-compile) ;;
    --out=*) out="${arg#*=}" ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d;s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_with_python: unknown flag $arg (see --help)" >&2; exit 2 ;;
  esac
done

if $from_bazel; then
  run_dir="$PWD"
  out_base="${BUILD_WORKING_DIRECTORY:-$PWD}"  # a relative --out means where bazel run started
else
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  cd "$root"
  python="${TDP_VENV:-$HOME/.cache/tdpolicy/venv}/bin/python3"
  [[ -x "$python" ]] || { echo "compare_with_python: no $python (run ./bazelw once to create the venv)" >&2; exit 1; }
  peer="$root/tests/benchmarks/python_peer.py"
  echo "compare_with_python: ./bazelw build -c opt //tests/benchmarks:actor_benchmark" >&2
  ./bazelw build -c opt //tests/benchmarks:actor_benchmark >&2
  # Not the bazel-bin symlink: another build with other flags may have moved it since.
  benchmark="$(./bazelw info -c opt bazel-bin 2>/dev/null)/tests/benchmarks/actor_benchmark"
  run_dir="$root"
  out_base="$start_dir"
fi
if [[ -n "$out" ]]; then
  [[ "$out" = /* ]] || out="$out_base/$out"
  mkdir -p "$out"
else
  out="$(mktemp -d "${TMPDIR:-/tmp}/compare_with_python.XXXXXX")"
  trap 'rm -rf "$out"' EXIT
fi

cd "$run_dir"  # both read policies/*.pbtxt relative to it
echo "== C++: actor_benchmark, $repetitions interleaved repetitions ==" >&2
OPENBLAS_NUM_THREADS=1 "$benchmark" \
  --benchmark_repetitions="$repetitions" --benchmark_enable_random_interleaving=true \
  --benchmark_display_aggregates_only=true \
  --benchmark_out="$out/cpp.json" --benchmark_out_format=json >&2

echo "== Python: python_peer.py, $repetitions interleaved repetitions ==" >&2
"$python" "$peer" --repetitions="$repetitions" "${peer_flags[@]}" \
  --json="$out/python.json" >/dev/null  # progress on stderr; its table is in python.json
"$python" "$peer" --cpp-json="$out/cpp.json" --python-json="$out/python.json" | tee "$out/table.md"
