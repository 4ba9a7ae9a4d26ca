/**
 * `run.speed_of_light` read for drawing: the FLOPs per step, the rate reached, and MFU against
 * the measured and the datasheet ceiling, each with the words a screen reader and the terminal
 * say. Pure, so the card and its text agree and are tested without a DOM.
 */
import { formatPct } from './format';
import type { Run } from '../report';

type Sol = NonNullable<Run['speed_of_light']>;

/** One bar of the gauge: the share of a ceiling the step reaches. */
export interface MfuBar {
  source: 'measured' | 'datasheet';
  pct: number;
  precision: string;
  tflops: number;
  label: string;
  text: string;
}

export interface SpeedOfLight {
  flops: string | null;
  mix: string | null;
  reached: string | null;
  bars: MfuBar[];
  unavailable: string | null;
}

/** 1.23 TFLOP, 456 GFLOP: FLOPs at the scale that fits them. */
export function formatFlops(flops: number): string {
  const scales: [number, string][] = [
    [1e15, 'PFLOP'],
    [1e12, 'TFLOP'],
    [1e9, 'GFLOP'],
    [1e6, 'MFLOP']
  ];
  for (const [scale, unit] of scales) {
    if (flops >= scale) {
      return `${(flops / scale).toPrecision(3)} ${unit}`;
    }
  }
  return `${flops.toPrecision(3)} FLOP`;
}

/** A rate: TFLOP/s from 1 up, GFLOP/s below (a CPU step). */
export function formatRate(tflops: number): string {
  return tflops >= 1
    ? `${tflops.toPrecision(3)} TFLOP/s`
    : `${(tflops * 1e3).toPrecision(3)} GFLOP/s`;
}

function finite(x: unknown): x is number {
  return typeof x === 'number' && Number.isFinite(x);
}

function mix(by: Record<string, number> | undefined): string | null {
  const entries = Object.entries(by ?? {}).filter(([, f]) => finite(f));
  const total = entries.reduce((s, [, f]) => s + f, 0);
  if (!entries.length || total <= 0) {
    return null;
  }
  return entries
    .map(([p, f]) => `${p} ${Math.round((100 * f) / total)}%`)
    .join(', ');
}

const WORDS: Record<MfuBar['source'], string> = {
  measured: 'measured on this GPU',
  datasheet: 'on the datasheet'
};

function bar(sol: Sol, source: MfuBar['source']): MfuBar | null {
  const pct = source === 'measured' ? sol.mfu_pct : sol.mfu_datasheet_pct;
  const c = (sol.ceilings ?? []).find(
    x => x.source === source && x.precision === sol.precision
  );
  if (!finite(pct) || !c || !finite(c.tflops)) {
    return null;
  }
  const text = `${formatPct(pct)} of the ${c.precision} rate ${WORDS[source]} (${formatRate(c.tflops)})`;
  return {
    source,
    pct,
    precision: c.precision,
    tflops: c.tflops,
    label: c.label,
    text
  };
}

/** The card's content; null where the run has no speed-of-light figures. */
export function readSpeedOfLight(
  run: Run | null | undefined
): SpeedOfLight | null {
  const sol = run?.speed_of_light;
  if (!sol || typeof sol !== 'object') {
    return null;
  }
  const flops = finite(sol.flops_per_step)
    ? formatFlops(sol.flops_per_step)
    : null;
  const reached =
    finite(sol.achieved_tflops) && finite(sol.step_time_ms)
      ? `${formatRate(sol.achieved_tflops)} over a ${sol.step_time_ms.toPrecision(3)} ms step`
      : null;
  const bars = [bar(sol, 'measured'), bar(sol, 'datasheet')].filter(
    (b): b is MfuBar => b !== null
  );
  return {
    flops,
    mix: mix(sol.flops_by_precision),
    reached,
    bars,
    unavailable: typeof sol.unavailable === 'string' ? sol.unavailable : null
  };
}
