#!/usr/bin/env bash
# Device call A (twelfth session): the GPU tests (with test_watch_compiled's GPU test, first
# run); the watch's sampler process paused and resumed around bare blocks (sampler_cost.py);
# every public scenario's own script bare and watched in one process, turns taken at its
# Steps.mark() (scenario_interleaved.py): the launch-bound ones on core 6, the rest free.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/python_pkg PYTHONUNBUFFERED=1
R=/tmp/r; rm -rf $R; mkdir -p $R
cp benchmarks/device_calls/COMMIT.txt $R/; cp "$0" $R/COMMAND.txt
save() { tar czf "$OUT/r.tgz" -C /tmp r; }
steal() { awk '/^cpu /{print "cpu jiffies user",$2,"system",$4,"idle",$5,"steal",$9}' /proc/stat; }
{ date; nproc; steal; cat /proc/loadavg; } > $R/host.txt 2>&1
OUT=$R/gpu timeout 100 bash benchmarks/run_gpu.sh tests > $R/tests.log 2>&1
save
OUT=$R/gpu timeout 130 bash benchmarks/run_gpu.sh sampler > $R/sampler.log 2>&1
{ date; steal; } >> $R/host.txt
save
SI=(python3 benchmarks/scenario_interleaved.py --budget-s 12)
timeout 130 "${SI[@]}" --only mlp_adam tiny_batch unbatched_inference item_per_step small_batch_rnn --core 6 --out $R/si-pinned > $R/si-pinned.log 2>&1
{ date; steal; } >> $R/host.txt
save
timeout 230 "${SI[@]}" --only pageable_copy cpu_model dataparallel conv_nchw_amp fp32_transformer healthy cpu_augment slow_loader bursty_loader --out $R/si-free > $R/si-free.log 2>&1
{ date; steal; cat /proc/loadavg; } >> $R/host.txt
save
tail -5 $R/tests.log; grep -A4 "^sampler cost\|^state" $R/gpu/sampler-*/sampler-cost.txt | head -20; head -8 $R/si-pinned/scenario-interleaved.txt; head -11 $R/si-free/scenario-interleaved.txt; tail -3 $R/si-free.log; cat $R/host.txt
