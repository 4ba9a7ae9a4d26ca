#!/usr/bin/env bash
# Device call C (twelfth session): where unbatched_inference's watch cost goes. In call B's
# machine, the watch cost it +3.9 %, overhead.py's `minimal` part (step and module hooks only)
# +2.7 %, while its clocks saw 0.55 %: torch's dispatch through two do-nothing hooks on the
# model (raw_hooks), then `minimal` again, in this machine.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/python_pkg PYTHONUNBUFFERED=1
R=/tmp/r; rm -rf $R; mkdir -p $R
cp benchmarks/device_calls/COMMIT.txt $R/; cp "$0" $R/COMMAND.txt
for P in raw_hooks minimal; do
  timeout 60 python3 benchmarks/watch_interleaved.py --workload unbatched_inference --pairs 200 --core 6 --part $P --out $R/il-$P > $R/il-$P.log 2>&1
  tar czf "$OUT/r.tgz" -C /tmp r
done
for P in raw_hooks minimal; do echo "== $P"; sed -n 5,7p $R/il-$P/watch-interleaved.txt; grep "own clocks" $R/il-$P/watch-interleaved.txt; done
