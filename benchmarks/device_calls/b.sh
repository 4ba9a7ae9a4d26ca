#!/usr/bin/env bash
# Device call B (twelfth session): scenario_interleaved.py again, its blocks now timed to the
# drained GPU (call A timed GPU-bound steps by their host marks), each scenario watched and
# against its control (both threads bare); then watch_cost.py's separate processes for the
# launch-bound scenarios (the window's extra wall, the exit cost, the report's step time).
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/python_pkg PYTHONUNBUFFERED=1
R=/tmp/r; rm -rf $R; mkdir -p $R
cp benchmarks/device_calls/COMMIT.txt $R/; cp "$0" $R/COMMAND.txt
save() { tar czf "$OUT/r.tgz" -C /tmp r; }
steal() { awk '/^cpu /{print "cpu jiffies user",$2,"system",$4,"idle",$5,"steal",$9}' /proc/stat; }
{ date; nproc; steal; cat /proc/loadavg; } > $R/host.txt 2>&1
SI=(python3 benchmarks/scenario_interleaved.py)
PINNED=(mlp_adam tiny_batch unbatched_inference item_per_step small_batch_rnn)
FREE=(pageable_copy cpu_model dataparallel conv_nchw_amp fp32_transformer healthy cpu_augment slow_loader bursty_loader)
for C in "" --control; do
  timeout 95 "${SI[@]}" --budget-s 10 --only "${PINNED[@]}" --core 6 $C --out $R/si-pinned$C > $R/si-pinned$C.log 2>&1
  { date; steal; } >> $R/host.txt; save
  timeout 150 "${SI[@]}" --budget-s 8 --only "${FREE[@]}" $C --out $R/si-free$C > $R/si-free$C.log 2>&1
  { date; steal; } >> $R/host.txt; save
done
timeout 90 python3 benchmarks/watch_cost.py --only mlp_adam tiny_batch unbatched_inference --rounds 1 --target-s 2 --budget 50 --out $R/cost > $R/cost.log 2>&1
{ date; steal; cat /proc/loadavg; } >> $R/host.txt
save
for f in si-pinned si-pinned--control si-free si-free--control; do head -16 $R/$f/scenario-interleaved.txt 2>/dev/null | grep -v "^W / B\|^each step\|^median steps\|^W's mean" ; done; head -5 $R/cost/watch-cost-table.txt; cat $R/host.txt
