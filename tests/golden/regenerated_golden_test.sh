#!/usr/bin/env bash
# Regenerates the distribution golden values from the installed torch, tensordict and TorchRL
# into $TEST_TMPDIR, then runs the golden suites of //tests/distributions:distributions_test
# against that file (TDP_GOLDEN_FILE), so the C++ is checked against the live packages and not
# only against the committed tests/golden/distributions_golden.txt.
# Usage (from tests/golden/BUILD.bazel): regenerated_golden_test.sh PYTHON SCRIPT TEST_BINARY
set -euo pipefail

python="$1"
script="$2"
test_binary="$3"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
golden="$tmp/distributions_golden.txt"

"$python" "$script" --out "$golden"
head -n 1 "$golden"

log="$tmp/distributions_test.log"
status=0
TDP_GOLDEN_FILE="$golden" "$test_binary" --gtest_filter='*Golden*:TensorsClose.*' \
  2>&1 | tee "$log" || status=$?
if ((status != 0)); then
  exit "$status"
fi
# A filter that matched nothing would pass silently.
passed="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log")"
if [[ -z "$passed" || "$passed" -eq 0 ]]; then
  echo "regenerated_golden_test: no golden test ran" >&2
  exit 1
fi
