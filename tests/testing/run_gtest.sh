#!/usr/bin/env bash
# Runs a gtest binary with its arguments and fails unless it passed and at least one test ran:
# a filter that matches nothing, or a binary with no tests, would otherwise pass silently.
# Usage (from a test script): run_gtest.sh BINARY [GTEST ARGUMENTS...]
set -euo pipefail

binary="$1"
shift
log="$(mktemp "${TEST_TMPDIR:-/tmp}/run_gtest.XXXXXX")"
status=0
"$binary" "$@" 2>&1 | tee "$log" || status=$?
if ((status != 0)); then
  exit "$status"
fi
passed="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log")"
if [[ -z "$passed" || "$passed" -eq 0 ]]; then
  echo "run_gtest.sh: $(basename "$binary") ran no test" >&2
  exit 1
fi
