#!/usr/bin/env bash
# Compiles the tiny AOTInductor package of make_aoti_package.py with the project venv's torch into
# a scratch folder (a package is native code for this machine, so it is made here, not committed),
# then runs aoti_package_test against it (TDP_AOTI_PACKAGE_DIR).
# Usage (from tests/policy/BUILD.bazel): aoti_package_test.sh RUN_GTEST PYTHON SCRIPT TEST
set -euo pipefail

run_gtest="$1"
python="$2"
script="$3"
test_binary="$4"

out="${TEST_TMPDIR:-$(mktemp -d)}/aoti_package"
rm -rf "$out"
# AOTInductor's compile cache and scratch files stay under the test's folder.
export TMPDIR="${TEST_TMPDIR:-${TMPDIR:-/tmp}}"
export TORCHINDUCTOR_CACHE_DIR="$TMPDIR/inductor_cache"
export PYTHONDONTWRITEBYTECODE=1
"$python" "$script" --out "$out"
export TDP_AOTI_PACKAGE_DIR="$out"
"$run_gtest" "$test_binary"
