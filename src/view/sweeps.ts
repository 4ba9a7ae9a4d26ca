/** Axis labels for sweep series, which the schema leaves to the benchmark or what-if that ran them. */
import type { Benchmark, Scalar, WhatIf } from '../report';

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
  [/^launch\./, 'Kernels per launch batch']
];

export function benchmarkAxes(b: Benchmark): { x: string; y: string } {
  const x =
    labelParam(b.params, 'x_label') ??
    BENCHMARK_X.find(([re]) => re.test(b.id))?.[1] ??
    'Setting';
  return { x, y: labelParam(b.params, 'y_label') ?? b.unit };
}

/** By the finding a what-if tests: what its sweep varies. */
const WHATIF_X: Record<string, string> = {
  'load.small_batch': 'Batch size',
  'load.input_bound': 'DataLoader workers',
  'load.cpu_preprocessing': 'DataLoader workers',
  'infer.unbatched': 'Batch size'
};

export function whatIfAxes(w: WhatIf): { x: string; y: string } {
  const x =
    labelParam(w.params, 'x_label') ??
    (w.finding_id ? WHATIF_X[w.finding_id] : undefined) ??
    'Setting';
  return { x, y: labelParam(w.params, 'y_label') ?? 'ms per step' };
}
