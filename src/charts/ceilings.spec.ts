// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';
import full from '../report/fixtures/full-report.json';
import type { Benchmark } from '../report';
import { ceilingRows, renderCeilings, rowScale } from './ceilings';

const benchmarks = full.benchmarks as Benchmark[];

describe('ceilingRows', () => {
  it('relates each value to its ceiling, and says why a benchmark was skipped', () => {
    const rows = ceilingRows(benchmarks);
    expect(rows[0].pctOfCeiling).toBeCloseTo((712.4 / 989.5) * 100, 6);
    expect(rows[0].text).toBe('712.4 TFLOP/s, 72.0% of 989.5 TFLOP/s');
    expect(rows[3].value).toBeNull();
    expect(rows[3].text).toBe(
      'skipped: budget of 10 s spent before this benchmark'
    );
  });
});

describe('renderCeilings', () => {
  it('puts each ceiling marker at the ceiling on its row’s scale', () => {
    const el = document.createElement('div');
    const rows = ceilingRows(benchmarks);
    const width = 500;
    renderCeilings(el, rows, {
      width,
      color: () => 'green',
      ceilingColor: 'black'
    });
    const rowEls = [...el.querySelectorAll('g.jp-GpusightCeilingsChart-row')];
    expect(rowEls.map(r => r.getAttribute('data-id'))).toEqual(
      rows.map(r => r.id)
    );
    // Measured rows have a bar; the skipped one has none.
    expect(
      el.querySelectorAll('rect.jp-GpusightCeilingsChart-bar').length
    ).toBe(3);
    expect(
      rowEls[3].querySelector('rect.jp-GpusightCeilingsChart-bar')
    ).toBeNull();
    expect(rowEls[3].classList.contains('jp-mod-skipped')).toBe(true);
    rows.slice(0, 3).forEach((row, i) => {
      const marker = rowEls[i].querySelector(
        'line.jp-GpusightCeilingsChart-ceiling'
      );
      const x = rowScale(row, width);
      expect(Number(marker?.getAttribute('x1'))).toBeCloseTo(
        x(row.ceiling as number),
        6
      );
      // The ceiling sits right of the bar's end when the value is below it.
      const bar = rowEls[i].querySelector('rect.jp-GpusightCeilingsChart-bar');
      const barEnd =
        Number(bar?.getAttribute('x')) + Number(bar?.getAttribute('width'));
      expect(Number(marker?.getAttribute('x1'))).toBeGreaterThan(barEnd);
    });
    // The pageable copy reaches 5.1 of 63 GB/s: its bar is about 8% of the ceiling's distance.
    const pageable = rowEls[2];
    const bar = pageable.querySelector('rect.jp-GpusightCeilingsChart-bar');
    const marker = pageable.querySelector(
      'line.jp-GpusightCeilingsChart-ceiling'
    );
    const ratio =
      Number(bar?.getAttribute('width')) /
      (Number(marker?.getAttribute('x1')) - 4);
    expect(ratio).toBeCloseTo(5.1 / 63, 2);
    expect(rowEls[0].querySelector('text')?.textContent).toBe(
      'bf16 matmul 8192³: 712.4 TFLOP/s, 72.0% of 989.5 TFLOP/s'
    );
    expect(
      el.querySelectorAll('path.jp-GpusightCeilingsChart-spread').length
    ).toBe(3);
  });
});

describe('mixed units without a reference', () => {
  it('draws no bar where there is no ceiling to read it against', () => {
    const rows = ceilingRows([
      { id: 'infer.latency_p50', label: 'Latency p50', value: 4.2, unit: 'ms' },
      {
        id: 'infer.throughput',
        label: 'Throughput',
        value: 7600,
        unit: 'samples/s'
      },
      {
        id: 'copy.h2d.pinned',
        label: 'H2D pinned',
        value: 24,
        unit: 'GB/s',
        ceiling: 32
      }
    ] as Benchmark[]);
    const el = document.createElement('div');
    renderCeilings(el, rows, {
      width: 300,
      color: () => 'green',
      ceilingColor: 'black'
    });
    expect(
      el.querySelectorAll('rect.jp-GpusightCeilingsChart-bar').length
    ).toBe(1);
    expect(
      el.querySelectorAll('line.jp-GpusightCeilingsChart-ceiling').length
    ).toBe(1);
    const texts = [
      ...el.querySelectorAll('text.jp-GpusightCeilingsChart-label')
    ].map(t => t.textContent ?? '');
    expect(texts[0]).toContain('4.2 ms');
    expect(texts[1]).toContain('7,600 samples/s');
    // A label too long for 300 px takes two lines, each cut to fit, never past the edge.
    const lines = [...el.querySelectorAll('text tspan')].map(
      t => t.textContent ?? ''
    );
    expect(lines.length).toBeGreaterThan(rows.length);
    expect(lines.every(t => t.length * 12 * 0.6 <= 300)).toBe(true);
  });
});
