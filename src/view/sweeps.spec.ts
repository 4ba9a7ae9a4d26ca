// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from 'vitest';
import type { WhatIf } from '../report';
import { scopeMismatchNote } from '../charts/scope';
import { drawSweeps, whatIfAxes, whatIfSweepTitle } from './sweeps';
import './whatifs';

/** An end-to-end batch row whose sweep was timed on cached batches (h200-whatif-run9). */
const batchRow: WhatIf = {
  change: 'batch_size=256 instead of 32 with your loader (ms per 32 samples)',
  before_ms: 41.224,
  after_ms: 38.336,
  speedup: 1.075,
  finding_id: 'load.small_batch',
  params: {
    batch_size: 256,
    compute_only_batch_size: 1024,
    compute_only_speedup: 6.3,
    against: 'your loader',
    series_scope: 'compute_only'
  },
  noise_pct: 2,
  series: [
    { x: 32, y: 1.608, label: 'yours' },
    { x: 64, y: 0.83 },
    { x: 256, y: 0.312 },
    { x: 1024, y: 0.255 },
    { x: 2048, y: 0.267 }
  ],
  scope: 'end_to_end'
};

function yTitle(el: Element): string {
  return [...el.querySelectorAll('.jp-GpusightChart-axisLabel.jp-mod-y tspan')]
    .map(t => t.textContent)
    .join(' ');
}

afterEach(() => document.body.replaceChildren());

describe('what-if sweeps say their scope', () => {
  it('labels a compute-only sweep under an end-to-end row as compute only, in title and axis', () => {
    expect(whatIfSweepTitle(batchRow)).toBe(
      'batch_size=256 instead of 32 with your loader (ms per 32 samples) ' +
        '(compute only: the model on cached batches)'
    );
    expect(whatIfAxes(batchRow)).toEqual({
      x: 'Batch size',
      y: 'compute-only ms per 32 samples'
    });
    const root = document.createElement('div');
    const host = document.createElement('div');
    host.className = 'host';
    root.appendChild(host);
    drawSweeps(root, 'host', [batchRow], 320, w => ({
      title: whatIfSweepTitle(w),
      ...whatIfAxes(w)
    }));
    // The whole axis title, on two lines rather than cut.
    expect(yTitle(root)).toBe('compute-only ms per 32 samples');
    expect(root.querySelector('svg')?.getAttribute('aria-label')).toContain(
      'compute only: the model on cached batches'
    );
  });

  it("never lets the sweep's gain read as the row's", () => {
    const note = scopeMismatchNote(batchRow);
    expect(note).toBe(
      'These points time the model alone on cached batches (compute only), where ' +
        "batch_size=1024 ran 6.30× faster: that is not this change's gain; end to end, " +
        'with your loader, it measured 1.07×.'
    );
    // Rows whose points and speedup agree (or do not say) need no such note.
    expect(
      scopeMismatchNote({
        ...batchRow,
        params: {},
        scope: 'compute_only'
      })
    ).toBeNull();
    expect(
      scopeMismatchNote({ ...batchRow, params: {}, scope: undefined })
    ).toBeNull();
  });

  it('labels a row timed end to end as such, and an older row as before', () => {
    const loader: WhatIf = {
      change: 'DataLoader(num_workers=16) instead of 0',
      before_ms: 40,
      after_ms: 3,
      speedup: 13,
      finding_id: 'load.input_bound',
      series: [
        { x: 0, y: 40, label: 'yours' },
        { x: 16, y: 3, label: '16 workers' }
      ],
      scope: 'end_to_end'
    };
    expect(whatIfAxes(loader).y).toBe('end-to-end ms per step');
    expect(whatIfSweepTitle(loader)).toBe(
      'DataLoader(num_workers=16) instead of 0 (end to end: the whole step with your loader)'
    );
    const older = { ...loader, scope: undefined };
    expect(whatIfAxes(older).y).toBe('ms per step');
    expect(whatIfSweepTitle(older)).toBe(older.change);
  });

  it('shows the scoped title and the note in the report', async () => {
    const el = document.createElement('gs-whatifs');
    el.whatIfs = [batchRow];
    document.body.appendChild(el);
    await el.updateComplete;
    const root = el.shadowRoot as ShadowRoot;
    expect(root.querySelector('h4')?.textContent).toContain(
      '(compute only: the model on cached batches)'
    );
    expect(
      root.querySelector('.jp-GpusightWhatIfs-scope')?.textContent
    ).toContain("not this change's gain");
  });
});
