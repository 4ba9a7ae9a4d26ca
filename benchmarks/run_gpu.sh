#!/usr/bin/env bash
# Every GPU check, in sequence, through gpusight's own code; results under $OUT.
#   bash benchmarks/run_gpu.sh        (from anywhere; OUT defaults to benchmarks/results/gpu-local)
# Each step's output goes to the terminal and to $OUT/run_gpu.log. A step may write
# $OUT/<name>-table.txt: the step summary and those tables are printed last.
# To add a check: one more `step NAME TIMEOUT_S COMMAND...` line below.
# Device time is scarce: the whole run takes about 4 minutes (gpu-tests ~15 s, bench ~190 s with ABBA rounds);
# the limits below only stop a hang. gpu_bench.py writes its log as it goes, so a step that
# is stopped still leaves $OUT/bench-reference.txt up to where it was.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results/gpu-local}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/python_pkg${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
LOG="$OUT/run_gpu.log"
: >"$LOG"
SUMMARY=()
FAILED=0

step() { # step NAME TIMEOUT_S COMMAND...
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  echo "=== $name: $*" | tee -a "$LOG"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || FAILED=1
  SUMMARY+=("$(printf '%-10s %-16s %4ss' "$name" "$([ "$rc" = 0 ] && echo ok || echo "FAILED (rc $rc)")" "$((SECONDS - t0))")")
}

T0=$SECONDS
step gpu-tests 90 "$PY" -m pytest -q -m gpu --noconftest -p no:cacheprovider python_pkg/tests/test_bench_gpu.py
step bench 330 "$PY" benchmarks/gpu_bench.py --out "$OUT"
step multi 240 "$PY" benchmarks/gpu_multi.py --out "$OUT"

{
  echo
  echo "=== summary"
  printf '%s\n' "${SUMMARY[@]}"
  echo "total $((SECONDS - T0))s"
  for table in "$OUT"/*-table.txt; do
    [ -f "$table" ] && { echo; cat "$table"; }
  done
} | tee -a "$LOG"
exit "$FAILED"
