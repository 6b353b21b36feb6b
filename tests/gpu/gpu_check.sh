#!/usr/bin/env bash
# The GPU check: everything the GPU machine must run, in one call of under 8 minutes.
# Runs in the repository root there, with tests/gpu/bundle carried from the build machine
# (bash tests/gpu/bundle.sh). That machine has python3 with torch 2.11.0+cu130, whose torch/lib
# is the LibTorch the binaries were built against, and the CUDA libraries of its wheel.
#
# In order, each step bounded in time and logged under $OUT (or /tmp/gpu_check) whatever the
# others did: the CUDA test binaries with TDP_REQUIRE_GPU=1 (a GPU case that would skip fails
# instead; gtest XML beside the logs); cuda_graph_benchmark (eager against CUDA-graph replay, the
# ensemble rows, the kernels of one call; Markdown tables); `tdp bench` on the GPU with and without
# graphs (the CLI's path); the Python peer (tensordict's CudaGraphModule on the same policies);
# batching_benchmark --device=cuda:0 (central batching on a GPU); aoti_cuda_check.py (a CUDA
# AOTInductor package exported here with nvcc, run by tdp on the GPU against Python). Exit
# status: 0 when every test passed and every step ran.
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
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader || true
site=$(dirname "$(dirname "$torch_lib")")
nvidia_libs=$(find "$site/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | tr '\n' ':')
image_library_path="${LD_LIBRARY_PATH:-}"
export LD_LIBRARY_PATH="$bundle/lib:$torch_lib:$nvidia_libs${LD_LIBRARY_PATH:-}"
export TDP_REQUIRE_GPU=1
for binary in "$bundle"/bin/*; do
  if ldd "$binary" | grep -q 'not found'; then
    echo "gpu_check: $(basename "$binary") cannot load:"
    ldd "$binary" | grep 'not found'
  fi
done

# The tests read policies/ as runfiles: $TEST_SRCDIR/tdpolicy/policies.
runfiles=$(mktemp -d)
ln -s "$PWD" "$runfiles/tdpolicy"

status=0
# step NAME SECONDS COMMAND...: runs COMMAND with its output in $out/NAME.log, bounded in time.
step() {
  local name=$1 seconds=$2
  shift 2
  echo "== $name"
  local start=$SECONDS
  timeout "$seconds" "$@" >"$out/$name.log" 2>&1
  local result=$?
  echo "($name: exit $result after $((SECONDS - start)) s)"
  ((result == 0)) || { echo "gpu_check: $name failed (exit $result); see $out/$name.log"; status=1; }
}

for test in distributions_cuda_test cuda_graph_module_test actor_cuda_test; do
  step "$test" 150 env TEST_SRCDIR="$runfiles" TEST_TMPDIR="$(mktemp -d)" "$bundle/bin/$test" \
    --gtest_output="xml:$out/$test.xml"
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|PASSED|Failure' "$out/$test.log" | tail -60
done

step cuda_graph_benchmark 150 "$bundle/bin/cuda_graph_benchmark" policies
cat "$out/cuda_graph_benchmark.log"

for graphs in on off; do
  step "tdp_bench_cartpole_graphs_$graphs" 60 "$bundle/bin/tdp" bench policies/cartpole_categorical.pbtxt \
    --device=cuda:0 --cuda_graph="$graphs" --batch=64 --iterations=2000
  cat "$out/tdp_bench_cartpole_graphs_$graphs.log"
done

# The Python peer: tensordict's CudaGraphModule on the same policies, with the wheels bundle.sh
# packed installed apart from the image's packages.
if compgen -G "$bundle/wheels/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/tdp_site \
    "$bundle"/wheels/*.whl || status=1
fi
step python_peer_gpu 240 env PYTHONPATH=/tmp/tdp_site python3 tests/gpu/python_peer_gpu.py
grep -v '\[INFO\]' "$out/python_peer_gpu.log"

step batching_benchmark_cuda 120 "$bundle/bin/batching_benchmark" --device=cuda:0 --seconds=1 --repetitions=1 \
  --clients=1,8,64 --envs=16
cat "$out/batching_benchmark_cuda.log"

# The AOTInductor fallback on the GPU: a CUDA package compiled here (nvcc, Triton) by
# tdpolicy.export, run by the bundled tdp on the GPU and compared with Python there. The tdpolicy
# package is bundled as source; its protobuf runtime (the release its generated code was made
# for) goes on this step's path alone, in its pure-Python form (the 4.21 C extension predates
# Python 3.12). Last: the compile takes a minute or two.
aoti_site=/tmp/tdp_aoti_site
if compgen -G "$bundle/aoti_wheels/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$aoti_site" \
    "$bundle"/aoti_wheels/*.whl || status=1
fi
# The export compiles with the image's g++, nvcc and Triton, which must not see the bundled
# libstdc++: Python keeps the image's library path, and tdp gets the bundle's through a wrapper.
printf '#!/bin/bash\nLD_LIBRARY_PATH=%q exec %q "$@"\n' "$LD_LIBRARY_PATH" "$bundle/bin/tdp" >"$runfiles/tdp"
chmod +x "$runfiles/tdp"
step aoti_cuda_check 300 env LD_LIBRARY_PATH="$image_library_path" \
  PYTHONPATH="$aoti_site:/tmp/tdp_site:$bundle/python" PYTHONUNBUFFERED=1 PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python \
  python3 tests/gpu/aoti_cuda_check.py --device cuda --tdp "$runfiles/tdp"
grep -vE '^\[INFO\]|^W[0-9]{4} ' "$out/aoti_cuda_check.log"

# Twelve logs and XML files: a lent machine returns at most eight files from $OUT, so they travel
# as one archive once every step has run (a run cut short leaves them loose).
logs=$(cd "$out" && shopt -s nullglob && echo *.log *.xml)
if [[ -n "$logs" ]] && (cd "$out" && tar -czf gpu_check_logs.tar.gz -- $logs); then
  (cd "$out" && rm -f -- $logs)
  echo "gpu_check: logs in $out/gpu_check_logs.tar.gz"
fi

echo "gpu_check: $([[ $status == 0 ]] && echo passed || echo FAILED)"
exit $status
