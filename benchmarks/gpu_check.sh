#!/usr/bin/env bash
# The environment doctor on a real GPU machine, without installing gpusight.
#
# Run from the repository root:   PYTHONPATH=python_pkg bash benchmarks/gpu_check.sh
# Needs python3 with torch, nvidia-ml-py and jsonschema (not ipywidgets or psutil: `gpusight
# check` imports neither). Writes $OUT/h200-check.json (the report, schema-validated) and
# $OUT/h200-check.txt (the terminal report); OUT defaults to benchmarks/results.
set -euo pipefail

OUT="${OUT:-benchmarks/results}"
mkdir -p "$OUT"
export PYTHONPATH="${PYTHONPATH:-python_pkg}"

echo "== host"
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,power.limit,power.default_limit --format=csv || true
python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' || true

echo "== gpusight check"
# Exit status 0 unless --strict; keep going to print the summary either way.
status=0
python3 -m gpusight check --no-color --json "$OUT/h200-check.json" | tee "$OUT/h200-check.txt" || status=$?

echo "== what the report says (validated against the schema)"
python3 - "$OUT/h200-check.json" <<'PY'
import sys
from gpusight import load_report

r = load_report(sys.argv[1])
m = r["machine"]
print("driver", m["driver_version"], "supports CUDA", m["driver_cuda_version"])
t = m["torch"] or {}
print("torch", t.get("version"), "cuda", t.get("cuda"), "available", t.get("cuda_available"))
for g in m["gpus"]:
    p = g.get("pcie") or {}
    print(
        f"GPU {g['index']}: {g['name']} cc {g.get('capability')} sm {g.get('sm_count')}, "
        f"PCIe Gen{p.get('gen')} x{p.get('width')} (max Gen{p.get('max_gen')} x{p.get('max_width')}, "
        f"{p.get('theoretical_gbps')} GB/s now), power {g.get('power_limit_w')} W "
        f"(default {g.get('power_default_limit_w')} W), reasons {g.get('clock_event_reasons')}"
    )
print("verdict:", r["verdict"]["bottleneck"], "-", r["verdict"]["summary"])
print("findings:", [(f["id"], f["severity"]) for f in r["findings"]])
missing = [i for i in ("cfg.tf32_disabled",) if i not in {f["id"] for f in r["findings"]}]
if missing:
    print("EXPECTED BUT MISSING with default torch settings:", missing)
PY
echo "gpusight check exit status: $status"
exit "$status"
