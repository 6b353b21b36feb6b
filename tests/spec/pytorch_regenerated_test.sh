#!/bin/bash
# Runs policies/export_from_pytorch.py with the machine's PyTorch into a scratch folder and
# checks the C++ side against what it just wrote, so the exporter itself is tested, not only
# its committed output. Without an importable torch it checks the committed files instead.
set -euo pipefail
interop_test="$1"
script="$2"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  out="${TEST_TMPDIR:-/tmp}/pytorch_exports"
  /usr/bin/python3 "$script" --out "$out"
  export TDP_PYTORCH_EXPORTS="$out"
  echo "checking files regenerated with $(/usr/bin/python3 -c 'import torch; print("torch", torch.__version__)')"
else
  echo "/usr/bin/python3 cannot import torch (apt-get install python3-torch): checking the committed files"
fi
exec "$interop_test"
