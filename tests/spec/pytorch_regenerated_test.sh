#!/usr/bin/env bash
# Runs policies/export_from_pytorch.py with the project venv's torch, tensordict and TorchRL
# into a scratch folder and checks the C++ side against what it just wrote
# (TDP_PYTORCH_EXPORTS), so the exporter itself is tested, not only its committed output in
# policies/pytorch/.
# Usage (from tests/spec/BUILD.bazel): pytorch_regenerated_test.sh PYTHON SCRIPT INTEROP_TEST
set -euo pipefail

python="$1"
script="$2"
interop_test="$3"

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

log="${TEST_TMPDIR:-$out}/pytorch_interop_test.log"
status=0
"$interop_test" 2>&1 | tee "$log" || status=$?
if ((status != 0)); then
  exit "$status"
fi
# A binary that ran no test would pass silently.
passed="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log")"
if [[ -z "$passed" || "$passed" -eq 0 ]]; then
  echo "pytorch_regenerated_test: no interop test ran" >&2
  exit 1
fi
