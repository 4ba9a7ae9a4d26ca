// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';
import {
  axisTicks,
  formatTick,
  isCount,
  nonOverlapping,
  stepOf,
  unitFromLabels
} from './axes';
import { renderSweep } from './sweep';

const tickTexts = (el: Element, axis: 'x' | 'y') =>
  [
    ...el.querySelectorAll(`g.jp-GpusightChart-axis.jp-mod-${axis} .tick text`)
  ].map(t => t.textContent);

describe('axis rules', () => {
  it('gives whole-number ticks for counts, even over a narrow range', () => {
    expect(isCount([0, 1, 2, 4])).toBe(true);
    expect(isCount([0.5, 1])).toBe(false);
    expect(axisTicks(0, 1, 6, true)).toEqual([0, 1]);
    expect(axisTicks(0, 8, 4, true)).toEqual([0, 2, 4, 6, 8]);
    for (const [lo, hi, n] of [
      [0, 1, 10],
      [1, 3, 12],
      [0, 12, 5],
      [2, 64, 8]
    ]) {
      const ticks = axisTicks(lo, hi, n, true);
      expect(ticks.every(Number.isInteger), `${lo}..${hi}`).toBe(true);
      expect(ticks[0]).toBeGreaterThanOrEqual(lo);
      expect(ticks[ticks.length - 1]).toBeLessThanOrEqual(hi);
    }
  });

  it('labels ticks without milli prefixes and with the decimals the step needs', () => {
    expect(formatTick(0.2, 0.2)).toBe('0.2');
    expect(formatTick(0.25, 0.05)).toBe('0.25');
    expect(formatTick(1200, 200)).toBe('1,200');
    expect(formatTick(1_500_000, 500_000)).toBe('1.5M');
    expect(stepOf([0, 0.5, 1])).toBe(0.5);
  });

  it('reads a label every point shares as the unit', () => {
    expect(
      unitFromLabels([{ label: 'ms' }, { label: 'ms' }, { label: 'ms' }])
    ).toBe('ms');
    expect(unitFromLabels([{ label: 'yours' }, {}])).toBeNull();
    expect(unitFromLabels([{ label: 'ms' }])).toBeNull();
  });

  it('keeps only labels that do not overlap', () => {
    expect(
      nonOverlapping([
        { x: 10, width: 20 },
        { x: 20, width: 20 },
        { x: 40, width: 10 }
      ])
    ).toEqual([0, 2]);
  });
});

describe('sweep axes from the data', () => {
  it('DataLoader workers: integer ticks, never "200m"', () => {
    const el = document.createElement('div');
    renderSweep(
      el,
      [
        { x: 0, y: 120 },
        { x: 1, y: 80 }
      ],
      {
        width: 400,
        title: 'workers',
        xLabel: 'DataLoader workers',
        yLabel: 'ms per step',
        color: 'blue'
      }
    );
    expect(tickTexts(el, 'x')).toEqual(['0', '1']);
    expect(tickTexts(el, 'y').some(t => /m$/.test(t ?? ''))).toBe(false);
  });

  it('inference sweep: unit labels become the axis unit, points carry values, no overlaps', () => {
    const el = document.createElement('div');
    const batches = [1, 2, 4, 8, 16, 32, 64, 128, 256];
    renderSweep(
      el,
      batches.map(b => ({ x: b, y: 1000 + b * 37.5, label: 'samples/s' })),
      {
        width: 300,
        title: 'Throughput',
        xLabel: 'Batch size',
        yLabel: '',
        color: 'blue'
      }
    );
    const yAxisLabel = el.querySelector(
      'text.jp-GpusightChart-axisLabel.jp-mod-y'
    );
    expect(yAxisLabel?.textContent).toBe('samples/s');
    const labels = [
      ...el.querySelectorAll('text.jp-GpusightSweepChart-pointLabel')
    ];
    expect(labels.length).toBeGreaterThan(0);
    // Values, not the unit, and fewer than the points: the crowded left end is thinned.
    expect(labels.every(t => /^[\d,.]+$/.test(t.textContent ?? ''))).toBe(true);
    expect(labels.length).toBeLessThan(batches.length);
  });
});
