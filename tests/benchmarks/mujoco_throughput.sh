#!/usr/bin/env bash
# Runs mujoco_throughput.py with the benchmark binary and the venv's interpreter that
# `bazel run //tests/benchmarks:mujoco_throughput` passes; further flags go to the script
# (--help lists them).
set -euo pipefail
benchmark="$PWD/$1" python="$PWD/$2" script="$PWD/$3"
shift 3
exec "$python" "$script" --cpp "$benchmark" "$@"
