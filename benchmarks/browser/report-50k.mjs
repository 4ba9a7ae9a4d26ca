// A recorded report (src/report/fixtures/full-report.json) with its timeline replaced by a long,
// realistic one: `samples` NVML samples of a GPU starved by its input pipeline (busy ~38% of each
// ~84 ms step, idle the rest), host CPU pegged, and the matching step boundaries.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export function report50k(samples = 50_000, intervalS = 0.005) {
  const report = JSON.parse(
    readFileSync(join(root, 'src/report/fixtures/full-report.json'), 'utf-8')
  );
  // Deterministic noise, so every run draws the same data.
  let seed = 42;
  const rand = () => (seed = (seed * 1664525 + 1013904223) >>> 0) / 2 ** 32;
  const stepS = 0.0842;
  const busyS = 0.0318;
  const timeline = [];
  for (let i = 0; i < samples; i++) {
    const t = +(i * intervalS).toFixed(4);
    const inStep = t % stepS;
    const busy = inStep < busyS;
    timeline.push({
      t,
      gpu: 0,
      util_pct: busy ? Math.round(92 + rand() * 8) : Math.round(rand() * 4),
      mem_used_bytes: 21474836480 + Math.round(rand() * 1e8),
      power_w: busy ? 520 + rand() * 90 : 140 + rand() * 30,
      sm_clock_mhz: 1980,
      cpu_pct: 95 + rand() * 5
    });
  }
  const steps = Math.floor((samples * intervalS) / stepS);
  report.run.steps = steps;
  report.run.timeline = timeline;
  report.run.step_starts_s = Array.from(
    { length: steps },
    (_x, i) => +(i * stepS).toFixed(4)
  );
  report.run.step_times_ms = Array.from(
    { length: steps },
    () => +(84.2 + (rand() - 0.5) * 2).toFixed(2)
  );
  return report;
}
