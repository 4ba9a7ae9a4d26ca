// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';
import { breakdownSegments, renderBreakdown } from './breakdown';

const breakdown = {
  compute: 31.8,
  data_wait: 2.1,
  copy: 26.4,
  sync_stall: 19.6,
  launch_overhead: 1.9,
  other_cpu: 2.4,
  communication: 0
};

describe('breakdownSegments', () => {
  it('keeps non-zero categories and shares of the step', () => {
    const segs = breakdownSegments(breakdown, 84.2);
    expect(segs.map(s => s.key)).toEqual([
      'compute',
      'data_wait',
      'copy',
      'sync_stall',
      'launch_overhead',
      'other_cpu'
    ]);
    const total = segs.reduce((a, s) => a + s.pct, 0);
    expect(total).toBeCloseTo(100, 6);
    expect(segs[0].start).toBe(0);
    expect(segs[1].start).toBeCloseTo(31.8);
  });

  it('shows time the categories do not explain as unattributed', () => {
    const segs = breakdownSegments({ compute: 50 }, 100);
    expect(segs.map(s => [s.key, s.pct])).toEqual([
      ['compute', 50],
      ['unattributed', 50]
    ]);
  });
});

describe('renderBreakdown', () => {
  it('draws one rect per non-zero category, labelled in ms and %', () => {
    const el = document.createElement('div');
    const segs = breakdownSegments(breakdown, 84.2);
    renderBreakdown(el, segs, { width: 600, color: () => 'red' });
    const rects = el.querySelectorAll('rect.jp-GpusightBreakdownChart-rect');
    expect(rects.length).toBe(6);
    const labels = [
      ...el.querySelectorAll('text.jp-GpusightBreakdownChart-label')
    ].map(t => t.textContent ?? '');
    expect(labels).toHaveLength(6);
    expect(labels[0]).toBe('GPU compute: 31.8 ms (37.8%)');
    expect(labels[2]).toBe('Host-device copies: 26.4 ms (31.4%)');
    for (const label of labels) {
      expect(label).toMatch(/\d ms \([<\d.]+%\)$/);
    }
    // Segments tile the bar left to right with no overlap.
    const xs = [...rects].map(r => [
      Number(r.getAttribute('x')),
      Number(r.getAttribute('width'))
    ]);
    for (let i = 1; i < xs.length; i++) {
      expect(xs[i][0]).toBeCloseTo(xs[i - 1][0] + xs[i - 1][1], 0);
    }
    const svg = el.querySelector('svg');
    expect(svg?.getAttribute('role')).toBe('img');
    expect(svg?.getAttribute('aria-label')).toBe('Step-time breakdown');
    expect(svg?.querySelector('desc')?.textContent).toContain(
      'Host-device copies 26.4 ms (31.4%)'
    );
  });

  it('says so when nothing was measured', () => {
    const el = document.createElement('div');
    renderBreakdown(el, [], { width: 600, color: () => 'red' });
    expect(el.querySelectorAll('rect').length).toBe(0);
    expect(el.querySelector('desc')?.textContent).toBe(
      'No step-time breakdown was measured.'
    );
  });
});
