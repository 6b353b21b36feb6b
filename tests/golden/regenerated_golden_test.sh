#!/usr/bin/env bash
# Regenerates the distribution golden values from the installed torch, tensordict and TorchRL
# into $TEST_TMPDIR, then runs the golden suites of //tests/distributions:distributions_test
# against that file (TDP_GOLDEN_FILE), so the C++ is checked against the live packages and not
# only against the committed tests/golden/distributions_golden.txt.
# Usage (from tests/golden/BUILD.bazel): regenerated_golden_test.sh RUN_GTEST PYTHON SCRIPT TEST_BINARY
set -euo pipefail

run_gtest="$1"
python="$2"
script="$3"
test_binary="$4"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
golden="$tmp/distributions_golden.txt"

"$python" "$script" --out "$golden"
head -n 1 "$golden"

TDP_GOLDEN_FILE="$golden" "$run_gtest" "$test_binary" --gtest_filter='*Golden*:TensorsClose.*'
