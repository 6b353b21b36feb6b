#!/usr/bin/env bash
# Runs policies/export_from_pytorch.py with the project venv's torch, tensordict and TorchRL
# into a scratch folder and checks the C++ side against what it just wrote
# (TDP_PYTORCH_EXPORTS), so the exporter itself is tested, not only its committed output in
# policies/pytorch/.
# Usage (from tests/spec/BUILD.bazel): pytorch_regenerated_test.sh RUN_GTEST PYTHON SCRIPT INTEROP_TEST
set -euo pipefail

run_gtest="$1"
python="$2"
script="$3"
interop_test="$4"

# The venv always has these; an interpreter without them is a broken setup, not a skip.
if ! versions="$("$python" -c 'import torch, tensordict, torchrl
print("torch", torch.__version__, "tensordict", tensordict.__version__, "torchrl", torchrl.__version__)')"; then
  echo "pytorch_regenerated_test: $python cannot import torch, tensordict and torchrl" \
    "(./bazelw installs them from third_party/python/requirements.txt)" >&2
  exit 1
fi

out="${TEST_TMPDIR:-$(mktemp -d)}/pytorch_exports"
rm -rf "$out"
"$python" "$script" --out "$out"
echo "checking files regenerated with $versions"
export TDP_PYTORCH_EXPORTS="$out"

"$run_gtest" "$interop_test"
