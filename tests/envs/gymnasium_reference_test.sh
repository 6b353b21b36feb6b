#!/usr/bin/env bash
# Records Gymnasium's environments with the venv's Gymnasium into a scratch folder (SCRIPT: one
# of gymnasium_*_reference.py, given SCRIPT_ARGS), then runs the C++ environments against those
# records (TEST, a gtest binary; TDP_GYMNASIUM_REFERENCE_DIR).
# Usage (from tests/envs/BUILD.bazel):
#   gymnasium_reference_test.sh RUN_GTEST PYTHON SCRIPT TEST [SCRIPT_ARGS...]
set -euo pipefail

run_gtest="$1"
python="$2"
script="$3"
test_binary="$4"
shift 4

out="${TEST_TMPDIR:-$(mktemp -d)}/gymnasium_reference"
rm -rf "$out"
export PYTHONDONTWRITEBYTECODE=1
"$python" "$script" --out "$out" "$@"
export TDP_GYMNASIUM_REFERENCE_DIR="$out"
"$run_gtest" "$test_binary"
