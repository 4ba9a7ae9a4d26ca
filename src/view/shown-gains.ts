/**
 * One gain per change, as the Python renderers show it (python_pkg/gpusight/one_gain.py): a
 * skipped row states no result, and a row that measured again a change another row measured
 * alone (`params.repeat_of`) is no gain of its own: that row's finding carries the change's gain
 * and says how the second measurement compares.
 */
import type { WhatIf } from '../report';

/** The `change` of the row this one measured again, or null. */
export function repeatOf(w: WhatIf): string | null {
  const v = w.params?.repeat_of;
  return typeof v === 'string' ? v : null;
}

/** Whether the report shows this row's speedup as a gain: measured, run, no repeat. */
export function showsGain(w: WhatIf): boolean {
  return typeof w.speedup === 'number' && !w.skipped && repeatOf(w) === null;
}

/** The rows the what-if section draws: gains, and partial sweeps (their points, with why). */
export function shownWhatIfs(rows: WhatIf[]): WhatIf[] {
  const swept = (w: WhatIf) => (w.series?.length ?? 0) > 1;
  return rows.filter(w => showsGain(w) || (swept(w) && repeatOf(w) === null));
}
