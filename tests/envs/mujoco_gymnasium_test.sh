#!/usr/bin/env bash
# Steps Gymnasium's MuJoCo tasks with the venv's Gymnasium into a scratch folder
# (gymnasium_mujoco_reference.py), then runs the C++ tasks against those records
# (mujoco_gymnasium_gtest, TDP_GYMNASIUM_REFERENCE_DIR).
# Usage (from tests/envs/BUILD.bazel): mujoco_gymnasium_test.sh RUN_GTEST PYTHON SCRIPT TEST
set -euo pipefail

run_gtest="$1"
python="$2"
script="$3"
test_binary="$4"

out="${TEST_TMPDIR:-$(mktemp -d)}/gymnasium_mujoco"
rm -rf "$out"
export PYTHONDONTWRITEBYTECODE=1
"$python" "$script" --out "$out" --steps 1000 HalfCheetah-v5 Hopper-v5 Walker2d-v5 Ant-v5 Humanoid-v5
export TDP_GYMNASIUM_REFERENCE_DIR="$out"
"$run_gtest" "$test_binary"
