#!/usr/bin/env bash
# A kernel *without* gpusight, for ui-tests/tests/sidebar.spec.ts ("the panel says how to install
# it"): a venv holding only ipykernel, and its kernelspec "gpusight-nogs" in ui-tests/.nogs/kernels,
# which jupyter_server_test_config.py adds to the test server's kernel folders.
# Idempotent: a venv that already has ipykernel is kept. Called by `make test-ui`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.nogs"
venv="$root/venv"
spec="$root/kernels/gpusight-nogs"
python="${NOGS_PYTHON:-python3}"

if ! "$venv/bin/python" -c 'import ipykernel' 2>/dev/null; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check ipykernel
fi
# The point of this kernel: gpusight must not be importable in it.
if "$venv/bin/python" -c 'import gpusight' 2>/dev/null; then
  echo "setup-nogs-kernel: $venv can import gpusight (PYTHONPATH=${PYTHONPATH:-}?)" >&2
  exit 1
fi
mkdir -p "$spec"
cat > "$spec/kernel.json" <<JSON
{
  "argv": ["$venv/bin/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
  "display_name": "Python (no gpusight)",
  "language": "python"
}
JSON
echo "setup-nogs-kernel: kernelspec gpusight-nogs -> $venv/bin/python"
