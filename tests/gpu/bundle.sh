#!/usr/bin/env bash
# Builds what the GPU machine runs (it has no Bazel and no package registry) and packs it into
# tests/gpu/bundle/ (ignored by git): the CUDA test and benchmark binaries and `tdp`, built with -c opt
# --config=cuda against this project's torch 2.11.0 and linked statically against our own code,
# plus the shared libraries they load that are neither torch's nor the system's (Abseil,
# protobuf, spdlog, fmt, GoogleTest, Google Benchmark, libstdc++), found with ldd, the Python
# peer's wheels, and the tdpolicy Python package with its protobuf runtime (for the AOTInductor
# check, which exports on the GPU machine).
#
#   bash tests/gpu/bundle.sh
#
# Then, on the GPU machine (the device tool's `run`, carrying tests/gpu/bundle):
#   bash tests/gpu/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

targets=(//tests/actor:actor_cuda_test //tests/nn:cuda_graph_module_test //tests/distributions:distributions_cuda_test
  //tests/benchmarks:cuda_graph_benchmark
  //tests/benchmarks:batching_benchmark //sdk/cli:tdp)
cache="${TDP_BAZEL_DISK_CACHE:-$HOME/.cache/tdpolicy/bazel-disk}"
./bazelw build -c opt --config=cuda --dynamic_mode=off --disk_cache="$cache" "${targets[@]}"

bundle=tests/gpu/bundle
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
for target in "${targets[@]}"; do
  binary="bazel-bin/$(echo "${target#//}" | tr ':' '/')"
  cp "$binary" "$bundle/bin/"
  chmod u+w "$bundle/bin/$(basename "$binary")"
  strip --strip-debug "$bundle/bin/$(basename "$binary")"
done

# Torch's own libraries (and the CUDA ones its wheel brings) are the GPU machine's; the C runtime
# and the loader are the system's. Everything else the binaries load travels.
for binary in "$bundle"/bin/*; do
  ldd "$binary" | awk '/=> \// { print $3 }'
done | sort -u | while read -r library; do
  case "$(basename "$library")" in
    libtorch* | libc10* | libcuda* | libcudart* | libcublas* | libcudnn* | libnv* | libnccl* | libcusparse* | \
      libcufft* | libcurand* | libcusolver* | libgomp* | libshm* | libc.so* | libm.so* | libpthread* | libdl.so* | \
      librt.so* | ld-linux*)
      continue ;;
  esac
  cp -L "$library" "$bundle/lib/"
done

# The Python peer (tests/gpu/python_peer_gpu.py) needs tensordict and TorchRL, which the GPU
# machine's image lacks: their wheels for its Python (3.12) at this venv's versions (the pins of
# third_party/python/requirements.txt), and those of their requirements that the image lacks.
venv_python="${TDP_VENV:-$HOME/.cache/tdpolicy/venv}/bin/python3"
wheels=()
for name in tensordict torchrl orjson pyvers hoptorch importlib_metadata lazy-importer; do
  wheels+=("$name==$("$venv_python" -m pip show "$name" | awk '/^Version:/ { print $2 }')")
done
"$venv_python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$bundle/wheels" "${wheels[@]}"

# The AOTInductor check (tests/gpu/aoti_cuda_check.py) exports on the GPU machine: the tdpolicy
# package, pure Python, built as `pip install ./sdk/python` builds it (setup.py's build_py runs
# protoc on proto/tdpolicy/*.proto into spec_pb2.py and tensor_pb2.py) from a scratch copy, as
# tests/python/exporter_test.sh does; and the protobuf runtime of that generated code (the venv's
# pin, 4.21.12, the Python release of protoc 3.21.12), since the image's protobuf is another
# release. gpu_check.sh puts protobuf on that step's PYTHONPATH alone.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/src/sdk" "$scratch/src/proto"
cp -rL sdk/python "$scratch/src/sdk/python"
cp -rL proto/tdpolicy "$scratch/src/proto/tdpolicy"
(cd "$scratch/src/sdk/python" && "$venv_python" setup.py -q build_py --build-lib "$scratch/lib") >"$scratch/build_py.log" 2>&1 || {
  cat "$scratch/build_py.log" >&2
  exit 1
}
for generated in spec_pb2.py tensor_pb2.py; do
  if [[ ! -f "$scratch/lib/tdpolicy/$generated" ]]; then
    echo "bundle: setup.py build_py did not generate tdpolicy/$generated" >&2
    exit 1
  fi
done
mkdir -p "$bundle/python"
cp -r "$scratch/lib/tdpolicy" "$bundle/python/"
find "$bundle/python" -name __pycache__ -prune -exec rm -rf {} +
"$venv_python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$bundle/aoti_wheels" \
  "protobuf==$("$venv_python" -m pip show protobuf | awk '/^Version:/ { print $2 }')"

size=$(du -sm "$bundle" | cut -f1)
echo "bundle: $bundle ($size MiB): $(ls "$bundle/bin" | tr '\n' ' ')" >&2
if ((size > 60)); then
  echo "bundle: $size MiB is over the 60 MiB that may travel with the working tree (64 MiB in all)" >&2
  exit 1
fi
