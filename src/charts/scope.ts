/**
 * What a what-if timed, in the words its charts say: its whole step with the user's own loader
 * (end to end), or the model alone on batches cached from the loader (compute only). A row's
 * `scope` is what its speedup covers; `params.series_scope`, where set, is what its sweep's
 * points cover, which can differ (an end-to-end batch row keeps the compute-only sweep).
 */
import type { WhatIf } from '../report/generated/report';
import { formatSpeedup } from './format';

export type Scope = 'end_to_end' | 'compute_only';

function asScope(v: unknown): Scope | null {
  return v === 'end_to_end' || v === 'compute_only' ? v : null;
}

/** What the row's speedup covers (null: an older report that does not say). */
export function rowScope(w: WhatIf): Scope | null {
  return asScope(w.scope);
}

/** What the row's sweep points cover: their own scope where set, else the row's. */
export function seriesScope(w: WhatIf): Scope | null {
  return asScope(w.params?.series_scope) ?? rowScope(w);
}

/** For a title: "compute only: the model on cached batches". */
export const SCOPE_TITLE: Record<Scope, string> = {
  compute_only: 'compute only: the model on cached batches',
  end_to_end: 'end to end: the whole step with your loader'
};

/** Before an axis' unit: "compute-only ms per 32 samples". */
export const SCOPE_AXIS: Record<Scope, string> = {
  compute_only: 'compute-only',
  end_to_end: 'end-to-end'
};

/** After a speedup: "1.08× end to end". */
export const SCOPE_WORDS: Record<Scope, string> = {
  compute_only: 'compute only',
  end_to_end: 'end to end'
};

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/**
 * When the row's speedup is end to end but its sweep compute only: the sentence that keeps the
 * sweep's gain from reading as the row's. Null when the two agree or either is not said.
 */
export function scopeMismatchNote(w: WhatIf): string | null {
  if (rowScope(w) !== 'end_to_end' || seriesScope(w) !== 'compute_only') {
    return null;
  }
  const alone = num(w.params?.compute_only_speedup);
  const batch = w.params?.compute_only_batch_size;
  const which = typeof batch === 'number' ? `batch_size=${batch}` : 'the best';
  const row = num(w.speedup);
  return (
    'These points time the model alone on cached batches (compute only)' +
    (alone !== null
      ? `, where ${which} ran ${formatSpeedup(alone)} faster`
      : '') +
    ": that is not this change's gain" +
    (row !== null
      ? `; end to end, with your loader, it measured ${formatSpeedup(row)}.`
      : '.')
  );
}
