// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';
import { approxTextWidth } from './frame';
import { renderSweep, useLogX } from './sweep';

describe('renderSweep', () => {
  it('uses a log axis for a wide sweep and breaks the line at a failed point', () => {
    const points = [
      { x: 1048576, y: 21.7, label: '1 MiB' },
      { x: 16777216, y: 48.9, label: '16 MiB' },
      { x: 134217728, y: null, label: 'timed out' },
      { x: 268435456, y: 54.8, label: '256 MiB' }
    ];
    expect(useLogX(points)).toBe(true);
    const el = document.createElement('div');
    renderSweep(el, points, {
      width: 400,
      title: 'H2D copy sweep',
      xLabel: 'Transfer size (bytes)',
      yLabel: 'GB/s',
      color: 'blue'
    });
    expect(el.querySelectorAll('circle').length).toBe(3);
    const failed = el.querySelectorAll('g.jp-GpusightSweepChart-failed');
    expect(failed.length).toBe(1);
    expect(failed[0].textContent).toBe('timed out');
    expect(
      [...el.querySelectorAll('text.jp-GpusightSweepChart-pointLabel')].map(
        t => t.textContent
      )
    ).toEqual(['1 MiB', '16 MiB', '256 MiB']);
    // The rightmost labels end at the edge instead of running off it.
    expect(failed[0].querySelector('text')?.getAttribute('text-anchor')).toBe(
      'middle'
    );
    expect(
      Number(
        el
          .querySelectorAll('text.jp-GpusightSweepChart-pointLabel')[2]
          .getAttribute('x')
      )
    ).toBeLessThan(0);
    const d =
      el.querySelector('path.jp-GpusightSweepChart-line')?.getAttribute('d') ??
      '';
    expect(d.match(/M/g)?.length).toBe(2);
    expect(
      el.querySelector('.jp-GpusightChart-axisLabel.jp-mod-x')?.textContent
    ).toBe('Transfer size (bytes) (log)');
    expect(el.querySelector('desc')?.textContent).toBe(
      '1 MiB: 21.7 GB/s; 16 MiB: 48.9 GB/s; timed out: failed; 256 MiB: 54.8 GB/s.'
    );
  });

  it("keeps a long label at the last point of a narrow chart inside the chart's width", () => {
    const el = document.createElement('div');
    const points = [0, 4, 8, 16].map(w => ({
      x: w,
      y: 1000 + w * 100,
      label: `num_workers=${w}, prefetch_factor=4`
    }));
    renderSweep(el, points, {
      width: 220,
      title: 'DataLoader workers',
      xLabel: 'DataLoader workers',
      yLabel: 'samples/s',
      color: 'blue'
    });
    const labels = [
      ...el.querySelectorAll('g.jp-GpusightSweepChart-point')
    ].filter(g => g.querySelector('text'));
    expect(labels.length).toBeGreaterThan(0);
    const plot = el
      .querySelector('g.jp-GpusightChart-axis.jp-mod-x')
      ?.parentElement?.getAttribute('transform');
    const left = Number(/translate\(([-\d.]+)/.exec(plot ?? '')?.[1]);
    for (const g of labels) {
      const px = Number(
        /translate\(([-\d.]+)/.exec(g.getAttribute('transform') ?? '')?.[1]
      );
      const t = g.querySelector('text')!;
      const centre = left + px + Number(t.getAttribute('x'));
      const half = approxTextWidth(t.textContent ?? '', 12) / 2;
      expect(t.getAttribute('text-anchor')).toBe('middle');
      expect(centre - half).toBeGreaterThanOrEqual(0);
      expect(centre + half).toBeLessThanOrEqual(220);
    }
  });

  it('wraps a y title too long for the axis onto two lines instead of cutting it', () => {
    const el = document.createElement('div');
    renderSweep(
      el,
      [
        { x: 32, y: 1.6 },
        { x: 64, y: 0.8 }
      ],
      {
        width: 250,
        title: 't',
        xLabel: 'Batch size',
        yLabel: 'compute-only ms per 32 samples',
        color: 'blue'
      }
    );
    const lines = [
      ...el.querySelectorAll('.jp-GpusightChart-axisLabel.jp-mod-y tspan')
    ].map(t => t.textContent);
    expect(lines).toEqual(['compute-only ms', 'per 32 samples']);
    // The plot moves right by a line so the outer line clears the tick labels.
    expect(el.querySelector('svg > g')?.getAttribute('transform')).toBe(
      'translate(67,10)'
    );
  });

  it('keeps a linear axis for a narrow sweep', () => {
    expect(
      useLogX([
        { x: 1, y: 2 },
        { x: 16, y: 3 }
      ])
    ).toBe(false);
  });
});
