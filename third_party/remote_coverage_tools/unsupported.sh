#!/bin/sh
echo "tdpolicy: 'bazel coverage' is not supported in the offline build (no remote_coverage_tools)." >&2
exit 1
