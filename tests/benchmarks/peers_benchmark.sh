#!/usr/bin/env bash
# The fused plan beside its peers in one run (tests/benchmarks/peers_benchmark.cc): exports the
# ONNX Runtime and AOTInductor peers (peers_export.py, into a temporary directory), finds the
# `onnxruntime` wheel's libonnxruntime in the project's venv, and runs the benchmark with
# interleaved repetitions, reporting medians. Extra arguments go to the benchmark.
#
#   tests/benchmarks/peers_benchmark.sh                       # from the repository root
#   tests/benchmarks/peers_benchmark.sh --benchmark_filter=CartPole
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
venv=${TDP_VENV:-$HOME/.cache/tdpolicy/venv}
./bazelw build -c opt //tests/benchmarks:peers_benchmark
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$venv/bin/python3" tests/benchmarks/peers_export.py "$dir"
lib=$(ls "$venv"/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so* 2>/dev/null | head -1 || true)
if [[ -z "$lib" ]]; then
  echo "no libonnxruntime.so* under $venv/lib/python3*/site-packages/onnxruntime/capi: is onnxruntime installed (./bazelw installs the pins)?" >&2
  exit 1
fi
echo "ONNX Runtime: $lib; load: $(cut -d' ' -f1-3 /proc/loadavg)"
OMP_NUM_THREADS=1 TDP_ORT_LIBRARY="$lib" TDP_PEER_ONNX_DIR="$dir" \
  ./bazelw run -c opt //tests/benchmarks:peers_benchmark -- \
  --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true "$@"
