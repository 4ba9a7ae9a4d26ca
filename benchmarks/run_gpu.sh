#!/usr/bin/env bash
# Every GPU check, in sequence, through gpusight's own code; results under $OUT.
#   bash benchmarks/run_gpu.sh [STEP...]   (from anywhere; OUT defaults to benchmarks/results/gpu-local)
# STEPs (default: all, in this order): tests bench whatif runwhatif accuracy overhead cost
# interleaved inference sampler callbacks patterns multi.
# One device command may run 10 minutes: split the steps over two, e.g.
#   bash benchmarks/run_gpu.sh tests bench             (~4 min)
#   bash benchmarks/run_gpu.sh whatif                  (~4-6 min)
#   bash benchmarks/run_gpu.sh accuracy overhead       (~8 min)
#   bash benchmarks/run_gpu.sh cost                    (~9 min)
#   bash benchmarks/run_gpu.sh si-pinned               (~4 min; SI_BUDGET=8)
#   bash benchmarks/run_gpu.sh si-free                 (~6 min; SI_BUDGET=8; `interleaved` is
#                                                        both: over 10 min even at SI_BUDGET=8)
#   bash benchmarks/run_gpu.sh inference               (~4 min)
#   bash benchmarks/run_gpu.sh sampler                 (~2 min)
#   bash benchmarks/run_gpu.sh callbacks               (~2 min)
#   bash benchmarks/run_gpu.sh patterns                (~2 min)
#   bash benchmarks/run_gpu.sh multi                   (2 GPUs, ~3 min)
#   bash benchmarks/run_gpu.sh shapes                  (the loop shapes, ~5 min)
#   bash benchmarks/run_gpu.sh mfu                     (MFU against a hand computation, ~2 min)
#   bash benchmarks/run_gpu.sh corpus-verdict          (the corpus's truth and verdicts)
#   CORPUS="a b" bash benchmarks/run_gpu.sh corpus-whatif   (their what-ifs against the truth)
# Each step's output goes to the terminal and to $OUT/run_gpu.log. A step may write
# $OUT/<name>-table.txt: the step summary and those tables are printed last.
# To add a check: one more `want NAME && step NAME TIMEOUT_S COMMAND...` line below.
# The limits only stop a hang. gpu_bench.py writes its log as it goes, so a step that is
# stopped still leaves $OUT/bench-reference.txt up to where it was. TAR=FILE packs $OUT into
# FILE after each step: a device command stopped at its limit still brings back every step
# that ended (the device returns eight files at most, so results travel packed).
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
  [ -z "${TAR:-}" ] || tar czf "$TAR" -C "$(dirname "$OUT")" "$(basename "$OUT")"
}

STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(tests bench whatif runwhatif accuracy overhead cost interleaved inference sampler callbacks patterns multi)
want() { [[ " ${STEPS[*]} " == *" $1 "* ]]; }

T0=$SECONDS
# Every test marked `gpu` (bench, watch, what-if), skipped elsewhere.
want tests && step gpu-tests 150 "$PY" -m pytest -q -m gpu --noconftest -p no:cacheprovider python_pkg/tests/test_bench_gpu.py python_pkg/tests/test_watch_hot_path.py python_pkg/tests/test_whatif_gpu.py python_pkg/tests/test_inference.py python_pkg/tests/test_rerun_inject.py python_pkg/tests/test_watch_sampler_process.py python_pkg/tests/test_watch_light_steps.py python_pkg/tests/test_watch_compiled.py
want bench && step bench 330 "$PY" benchmarks/gpu_bench.py --out "$OUT"
want whatif && step whatif 420 "$PY" benchmarks/gpu_whatif.py --out "$OUT/whatif"
# gpusight run --what-if on each scenario's unmodified script vs its fix (SCENARIOS="a b" for some).
want runwhatif && step runwhatif 1500 "$PY" benchmarks/run_whatif.py --out "$OUT/runwhatif" ${SCENARIOS:+--only $SCENARIOS} --budget "${WHATIF_BUDGET:-90}"
# --no-bare: the external overhead is --method overhead's job (same process, ABBA rounds).
# The loop shapes (#34): verdict, phase and the lead finding's estimate against each --fix.
want shapes && step shapes 330 "$PY" benchmarks/accuracy.py --suite shapes --out "$OUT/shapes"
# The speed of light (#35): MFU against a hand computation (GPT blocks, ResNet-50).
want mfu && step mfu 200 "$PY" benchmarks/mfu_check.py --out "$OUT/mfu"
want accuracy && step accuracy 240 "$PY" benchmarks/accuracy.py --no-bare --out "$OUT/acc"
want overhead && step overhead 240 "$PY" benchmarks/watch_cost.py --method overhead --out "$OUT/ov"
want overhead && step micro 60 "$PY" benchmarks/watch_cost.py --method overhead --micro --out "$OUT/ov"
# The shortest steps, resolved to a percent: one model, one loop, rotated rounds (inference;
# then a launch-bound training step).
want overhead && step parts 150 "$PY" benchmarks/watch_cost.py --method parts --parts bare watched --rounds 80 --block-s 0.2 --out "$OUT/parts"
# What `gpusight run` costs the script, from the script's own clock, process against process
# (#20): the launch-bound scenarios pinned and in more rounds, then the rest.
want cost && step probe 120 "$PY" benchmarks/watch_cost.py --method probe-profiler
want cost && step cost 420 "$PY" benchmarks/watch_cost.py --method process --only mlp_adam tiny_batch unbatched_inference --rounds 5 --cpus 2-5 --target-s 2 --out "$OUT/cost-launch"
want cost && step cost-rest 600 "$PY" benchmarks/watch_cost.py --method process --rounds 1 --budget 500 --only conv_nchw_amp fp32_transformer slow_loader bursty_loader item_per_step pageable_copy cpu_model small_batch_rnn healthy --out "$OUT/cost-rest"
# The same to about a percent: one watch, 25-step blocks interleaved with bare ones, two threads
# on core 6 (the sampler process on the others), each workload against its control (W bare too).
for W in tiny_batch mlp_adam unbatched_inference; do
  want overhead && step "il-$W" 150 bash -c "'$PY' benchmarks/watch_cost.py --method interleaved --workload $W --pairs 300 --core 6 --control --out '$OUT/il-$W-control' && '$PY' benchmarks/watch_cost.py --method interleaved --workload $W --pairs 300 --core 6 --out '$OUT/il-$W'"
done
# Every public scenario's own script, bare and watched in one process, taking turns at its own
# step clock (#20's steady figure), then each against its control (both threads bare). The
# launch-bound ones on core 6 (the sampler process on the others); the rest where the kernel
# puts them (CPU work, whose thread pool would share the one core, or long steps). Unpinned,
# dataparallel and pageable_copy read +3.1 % and +2.1 % with intervals of ±3 % (h200-run16/b).
# SI_PINNED / SI_FREE name fewer (bursty_loader's blocks are the slowest to fill: give it a
# command of its own when the rest must fit in one).
PINNED="${SI_PINNED:-mlp_adam tiny_batch unbatched_inference item_per_step small_batch_rnn dataparallel pageable_copy}"
FREE="${SI_FREE:-cpu_model conv_nchw_amp fp32_transformer healthy cpu_augment slow_loader bursty_loader}"
for C in "" --control; do
  { want interleaved || want si-pinned; } && step "si-pinned$C" 300 "$PY" benchmarks/watch_cost.py --method scenario --only $PINNED --core 6 --budget-s "${SI_BUDGET:-15}" $C --out "$OUT/si-pinned$C"
  { want interleaved || want si-free; } && step "si-free$C" 420 "$PY" benchmarks/watch_cost.py --method scenario --only $FREE --budget-s "${SI_BUDGET:-15}" $C --out "$OUT/si-free$C"
done
# The inference step's parts (#20's open figure, +4.6 % in h200-run16/b): torch's hook path
# alone (raw_hooks: two do-nothing hooks, no watch), the hooks with the watch's bodies (minimal),
# the whole watch, and the control; then the same Python on this host's CPU with no GPU in the
# loop (--method hook: what the hooks cost hot, against the figures above, cold), and the clock.
want inference && step inf-host 60 bash -c "cat /sys/devices/system/clocksource/clocksource0/current_clocksource; '$PY' -m timeit -s 'from time import perf_counter_ns' 'perf_counter_ns()'"
for P in control raw_hooks minimal watched; do
  A="--part $P"; [ $P = control ] && A="--control"
  want inference && step "inf-$P" 90 "$PY" benchmarks/watch_cost.py --method interleaved --workload unbatched_inference --pairs 200 --core 6 $A --out "$OUT/inf-$P"
done
want inference && step inf-hook-cost 120 "$PY" benchmarks/watch_cost.py --method hook --workload infer --parts minimal watched --rounds 40 --out "$OUT/inf-hook-cost"
# What the sampler process costs those steps (it runs through both threads' turns above).
for W in unbatched_inference tiny_batch; do
  want sampler && step "sampler-$W" 120 "$PY" benchmarks/watch_cost.py --method sampler --workload $W --rounds 30 --block-s 0.5 --out "$OUT/sampler-$W"
done
want overhead && step parts-train 150 "$PY" benchmarks/watch_cost.py --method parts --workload tiny_batch --parts bare watched all_hooks --rounds 40 --block-s 0.15 --settle-s 0.5 --out "$OUT/parts-train"
# The trainer callbacks against `gpusight run` on the same script (#19; the image has the frameworks).
want callbacks && step callbacks 420 "$PY" benchmarks/gpu_whatif.py --suite callbacks --out "$OUT/callbacks"
# Loop shapes from public training code: the report's steps and step time against the loop's own
# clock (each iteration synchronised).
want patterns && step patterns 240 "$PY" benchmarks/accuracy.py --suite patterns --device cuda --out "$OUT/patterns"
want multi && step multi 240 "$PY" benchmarks/gpu_multi.py --out "$OUT"
# The real-library corpus (corpus/): each script's truth (bare against --fix, its own clock) and,
# in the same lease, its verdict alone (corpus-verdict) or its what-if (corpus-whatif; CORPUS="a
# b" for some, CORPUS_BUDGET seconds each).
want corpus-verdict && step corpus-verdict 580 "$PY" benchmarks/run_whatif.py --suite corpus --verdict-only --out "$OUT/corpus-verdict" ${CORPUS:+--only $CORPUS}
want corpus-whatif && step corpus-whatif 580 "$PY" benchmarks/run_whatif.py --suite corpus --budget "${CORPUS_BUDGET:-180}" --out "$OUT/corpus-whatif" ${CORPUS:+--only $CORPUS}

{
  echo
  echo "=== summary"
  printf '%s\n' "${SUMMARY[@]}"
  echo "total $((SECONDS - T0))s"
  for table in "$OUT"/*-table.txt "$OUT"/*/*-table.txt; do
    [ -f "$table" ] && { echo; cat "$table"; }
  done
} | tee -a "$LOG"
[ -z "${TAR:-}" ] || tar czf "$TAR" -C "$(dirname "$OUT")" "$(basename "$OUT")"
exit "$FAILED"
