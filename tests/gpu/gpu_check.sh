#!/usr/bin/env bash
# The GPU check (issue 13): everything the GPU machine must run, in one call of under 8 minutes.
# Runs in the repository root there, with tests/gpu/bundle carried from the build machine
# (bash tests/gpu/bundle.sh). That machine has python3 with torch 2.11.0+cu130, whose torch/lib
# is the LibTorch the binaries were built against, and the CUDA libraries of its wheel.
#
# It runs the CUDA test binaries with TDP_REQUIRE_GPU=1 (a GPU case that would skip fails
# instead), then the benchmark, and writes their logs, gtest XML and the benchmark's Markdown
# table under $OUT (or /tmp/gpu_check). Exit status: 0 when every test passed.
set -uo pipefail
cd "$(dirname "$0")/../.."

bundle="$PWD/tests/gpu/bundle"
out="${OUT:-/tmp/gpu_check}"
mkdir -p "$out"
if [[ ! -d "$bundle/bin" ]]; then
  echo "gpu_check: $bundle is missing: run 'bash tests/gpu/bundle.sh' on the build machine and carry tests/gpu/bundle" >&2
  exit 2
fi

torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))') || {
  echo "gpu_check: python3 cannot import torch" >&2
  exit 2
}
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name(0))'
site=$(dirname "$(dirname "$torch_lib")")
nvidia_libs=$(find "$site/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | tr '\n' ':')
export LD_LIBRARY_PATH="$bundle/lib:$torch_lib:$nvidia_libs${LD_LIBRARY_PATH:-}"
export TDP_REQUIRE_GPU=1

# The tests read policies/ as runfiles: $TEST_SRCDIR/tdpolicy/policies.
runfiles=$(mktemp -d)
ln -s "$PWD" "$runfiles/tdpolicy"

status=0
for test in cuda_graph_module_test actor_cuda_test; do
  echo "== $test"
  TEST_SRCDIR="$runfiles" TEST_TMPDIR="$(mktemp -d)" timeout 240 "$bundle/bin/$test" \
    --gtest_output="xml:$out/$test.xml" >"$out/$test.log" 2>&1
  result=$?
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|PASSED|Failure' "$out/$test.log" | tail -40
  ((result == 0)) || { echo "gpu_check: $test failed (exit $result); see $out/$test.log"; status=1; }
done

echo "== cuda_graph_benchmark"
timeout 240 "$bundle/bin/cuda_graph_benchmark" policies >"$out/cuda_graph_benchmark.md" 2>&1 || status=1
cat "$out/cuda_graph_benchmark.md"
echo "gpu_check: $([[ $status == 0 ]] && echo passed || echo FAILED)"
exit $status
