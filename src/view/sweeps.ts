/**
 * Sweep series of benchmarks and what-ifs: which ones to draw, their axis labels (which the schema
 * leaves to the benchmark or what-if that ran them), and drawing them into their hosts.
 */
import { unitFromLabels } from '../charts/axes';
import { SCOPE_AXIS, SCOPE_TITLE, seriesScope } from '../charts/scope';
import { renderSweep, type SweepPoint } from '../charts/sweep';
import type { Benchmark, Scalar, WhatIf } from '../report';
import { SIZE, SWEEP_COLOR } from './tokens';

/** A benchmark or a what-if: anything that may carry a sweep. */
interface Swept {
  series?: SweepPoint[];
}

/** The items whose series is a sweep (two points or more), in their order. */
export function withSweeps<T extends Swept>(items: T[] | undefined): T[] {
  return (items ?? []).filter(item => (item.series?.length ?? 0) > 1);
}

/**
 * Draw each item's sweep at `width` px into the hosts of class `hostClass` under `root`: the
 * i-th host holds the i-th item's sweep (render one host per item of `withSweeps`).
 */
export function drawSweeps<T extends Swept>(
  root: ParentNode,
  hostClass: string,
  items: T[],
  width: number,
  describe: (item: T) => { title: string; x: string; y: string }
): void {
  const hosts = root.querySelectorAll<HTMLElement>(`.${hostClass}`);
  items.forEach((item, i) => {
    const { title, x, y } = describe(item);
    renderSweep(hosts[i], item.series ?? [], {
      width: width,
      height: SIZE.sweepHeight,
      title: title,
      xLabel: x,
      yLabel: y,
      color: SWEEP_COLOR
    });
  });
}

function labelParam(
  params: Record<string, Scalar> | undefined,
  key: string
): string | null {
  const value = params?.[key];
  return typeof value === 'string' && value ? value : null;
}

/** By benchmark id prefix: what the sweep varies. */
const BENCHMARK_X: [RegExp, string][] = [
  [/^copy\./, 'Transfer size (bytes)'],
  [/^loader\./, 'DataLoader workers'],
  [/^matmul\./, 'Matrix size'],
  [/^launch\./, 'Kernels per launch batch'],
  [/^infer\./, 'Batch size']
];

export function benchmarkAxes(b: Benchmark): { x: string; y: string } {
  const x =
    labelParam(b.params, 'x_label') ??
    BENCHMARK_X.find(([re]) => re.test(b.id))?.[1] ??
    'Setting';
  return {
    x,
    y:
      labelParam(b.params, 'y_label') ??
      unitFromLabels(b.series ?? []) ??
      b.unit
  };
}

/** "(ms per 32 samples)" at the end of a what-if's change names what its sweep measures. */
function unitInChange(change: string): string | null {
  const m = /\(((?:ms|time|samples)[^()]*)\)\s*$/.exec(change);
  return m ? m[1] : null;
}

/** By the finding a what-if tests: what its sweep varies. */
const WHATIF_X: Record<string, string> = {
  'load.small_batch': 'Batch size',
  'load.input_bound': 'DataLoader workers',
  'load.cpu_preprocessing': 'DataLoader workers',
  'infer.unbatched': 'Batch size'
};

/** A sweep over batch sizes says so whatever finding it tests. */
function batchSweep(w: WhatIf): boolean {
  return (
    /batch/i.test(w.change) &&
    (w.series ?? []).every(p => Number.isInteger(p.x))
  );
}

export function whatIfAxes(w: WhatIf): { x: string; y: string } {
  const x =
    labelParam(w.params, 'x_label') ??
    (w.finding_id ? WHATIF_X[w.finding_id] : undefined) ??
    (batchSweep(w) ? 'Batch size' : 'Setting');
  const unit =
    labelParam(w.params, 'y_label') ??
    unitFromLabels(w.series ?? []) ??
    unitInChange(w.change) ??
    'ms per step';
  const scope = seriesScope(w);
  return { x, y: scope ? `${SCOPE_AXIS[scope]} ${unit}` : unit };
}

/** A what-if sweep's title: its change, and what its points timed where the report says. */
export function whatIfSweepTitle(w: WhatIf): string {
  const scope = seriesScope(w);
  return scope ? `${w.change} (${SCOPE_TITLE[scope]})` : w.change;
}
