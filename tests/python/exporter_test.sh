#!/usr/bin/env bash
# Builds the tdpolicy package the way `pip install ./sdk/python` does (setup.py's build_py, which
# runs protoc on proto/tdpolicy/*.proto) into a scratch folder, without touching the shared venv,
# then runs the test file given (through junit_runner.py, which writes each case to Bazel's
# XML) with it on PYTHONPATH and the C++ `tdp` as TDP_BIN.
# With a fourth argument, the compiled extension (//sdk/python:_C.so) is copied into the package
# as tdpolicy/_C.so, where `pip install ./sdk/python` puts it.
# Usage (from tests/python/BUILD.bazel): exporter_test.sh PYTHON TDP TEST_PY [_C.so]
set -euo pipefail

absolute() { [[ "$1" == /* ]] && echo "$1" || echo "$PWD/$1"; }
python="$(absolute "$1")"
tdp="$(absolute "$2")"
test_py="$(absolute "$3")"
extension="${4:+$(absolute "$4")}"

# Under --config=asan / tsan (tests/sanitize.sh) the extension links a sanitizer runtime, which an
# uninstrumented python cannot load first: those runs skip the Python side (the C++ collector and
# actor have their own sanitized gtests: //tests/env:env_test, //tests/actor/...).
# (The dynamic section is read whole before matching: under pipefail, `readelf | grep -q` fails
# whenever grep exits before readelf has written everything.)
if [[ -n "$extension" && "$(readelf -d "$extension" 2>/dev/null)" =~ lib(a|t)san ]]; then
  echo "exporter_test: $extension links a sanitizer runtime; skipped under this configuration"
  exit 0
fi

if ! versions="$("$python" -c 'import torch, tensordict, torchrl, google.protobuf as p
print("torch", torch.__version__, "tensordict", tensordict.__version__, "torchrl", torchrl.__version__,
      "protobuf", p.__version__)')"; then
  echo "exporter_test: $python cannot import torch, tensordict, torchrl and protobuf" \
    "(./bazelw installs them from third_party/python/requirements.txt)" >&2
  exit 1
fi
echo "exporter_test: $versions, $(protoc --version)"

scratch="${TEST_TMPDIR:-$(mktemp -d)}/exporter_test"
rm -rf "$scratch"
# The package's setup.py finds the schema two levels up, as in the repository: copy both
# (dereferencing the runfiles links) with that layout.
mkdir -p "$scratch/src/sdk" "$scratch/src/proto" "$scratch/lib"
cp -rL sdk/python "$scratch/src/sdk/python"
cp -rL proto/tdpolicy "$scratch/src/proto/tdpolicy"
(cd "$scratch/src/sdk/python" && "$python" setup.py -q build_py --build-lib "$scratch/lib" >/dev/null)
for generated in spec_pb2.py tensor_pb2.py; do
  if [[ ! -f "$scratch/lib/tdpolicy/$generated" ]]; then
    echo "exporter_test: setup.py build_py did not generate tdpolicy/$generated" >&2
    exit 1
  fi
done

if [[ -n "$extension" ]]; then
  cp "$extension" "$scratch/lib/tdpolicy/_C.so"
fi

export PYTHONPATH="$scratch/lib"
export PYTHONDONTWRITEBYTECODE=1
export TDP_BIN="$tdp"
"$python" "$(dirname "$test_py")/junit_runner.py" "$test_py"
