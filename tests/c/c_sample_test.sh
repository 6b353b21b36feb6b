#!/usr/bin/env bash
# Runs the C sample (samples/c_policy, compiled as C) on policies from policies/ and on a
# missing file.
# Usage (tests/c/BUILD.bazel): c_sample_test.sh C_POLICY CARTPOLE_SPEC GRU_SPEC
set -euo pipefail
sample="$1"
output="$("$sample" "$2" 12)"
echo "$output"
grep -q "out action           int64    \[\]" <<<"$output"
grep -q "^12 episodes in 8 environments, [0-9]* steps: return mean" <<<"$output"
output="$("$sample" "$3" 4)"
echo "$output"
grep -q "in  hidden           float32  \[32\]" <<<"$output"
grep -q "^4 episodes in 8 environments" <<<"$output"
status=0
output="$("$sample" "$TEST_TMPDIR/missing.pbtxt" 2>&1)" || status=$?
echo "$output"
if ((status != 1)); then
  echo "FAIL: exit status $status on a missing spec, expected 1" >&2
  exit 1
fi
grep -q "tdp_actor_load failed (TDP_NOT_FOUND): tdp_actor_load: .*missing.pbtxt" <<<"$output"
echo PASS
