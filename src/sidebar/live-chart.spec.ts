// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';
import { compact, renderLiveChart, visibleMax } from './live-chart';
import { chartSpecs } from './monitor-view';
import type { MonitorStatusMsg, Tick } from './messages';
import { MonitorStore } from './store';

const series = (n: number, f: (i: number) => number) => ({
  key: 'gpu0',
  label: 'GPU',
  t: Float64Array.from({ length: n }, (_, i) => i / 10),
  v: Float64Array.from({ length: n }, (_, i) => f(i)),
  color: 'var(--jp-brand-color1)'
});

describe('renderLiveChart', () => {
  it('draws the window only, decimated to the width, with the cells shaded', () => {
    const host = document.createElement('div');
    const s = series(36_000, i => (i % 20 < 10 ? 0 : 100));
    const result = renderLiveChart(host, [s], {
      width: 300,
      height: 84,
      t0: 3540,
      t1: 3599.9,
      yMax: 100,
      format: v => `${v}%`,
      label: 'Utilisation, live',
      description: 'test',
      cells: [
        { start: 10, end: 20, executionCount: 1, success: true }, // off the window
        { start: 3550, end: 3560, executionCount: 2, success: true },
        { start: 3590, end: null, executionCount: null, success: null }
      ]
    });
    // 600 samples in the window (+1 either side so the line reaches the edges), not 36,000.
    expect(result.points.gpu0).toBeGreaterThan(100);
    expect(result.points.gpu0).toBeLessThanOrEqual(602);
    expect(result.cells).toBe(2);
    expect(host.querySelectorAll('svg')).toHaveLength(1);
    expect(
      host.querySelectorAll('.jp-GpusightLiveChart-cell.jp-mod-running')
    ).toHaveLength(1);
    expect(host.querySelector('svg')!.getAttribute('aria-label')).toBe(
      'Utilisation, live'
    );
    const ticks = [...host.querySelectorAll('.jp-mod-x .tick text')].map(
      t => t.textContent
    );
    expect(ticks.some(t => t?.startsWith('-'))).toBe(true);
  });

  it('scales the y axis to the data when there is no fixed top', () => {
    const s = series(100, i => i);
    expect(visibleMax([s], 0, 5)).toBe(50);
    const host = document.createElement('div');
    renderLiveChart(host, [s], {
      width: 300,
      height: 84,
      t0: 0,
      t1: 9.9,
      yMax: null,
      format: v => String(v),
      label: 'x',
      description: 'x',
      cells: []
    });
    const labels = [...host.querySelectorAll('.jp-mod-y .tick text')].map(t =>
      Number(t.textContent)
    );
    expect(Math.max(...labels)).toBeGreaterThanOrEqual(99 * 0.9);
  });

  it("keeps 'now' at the right edge whole instead of cutting it to 'nov'", () => {
    const host = document.createElement('div');
    renderLiveChart(host, [series(600, () => 50)], {
      width: 250,
      height: 84,
      t0: 0,
      t1: 59.9,
      yMax: 100,
      format: v => `${v}%`,
      label: 'x',
      description: 'x',
      cells: []
    });
    const now = [...host.querySelectorAll('.jp-mod-x .tick text')].find(
      t => t.textContent === 'now'
    );
    expect(now).toBeDefined();
    // Anchored at its end on the plot's right edge: it ends there, inside the 8 px margin.
    expect(now?.getAttribute('text-anchor')).toBe('end');
    // The others stay centred on their ticks.
    const first = host.querySelector('.jp-mod-x .tick text');
    expect(first?.textContent).not.toBe('now');
    expect(first?.getAttribute('text-anchor')).toBeNull();
  });

  it('joins up sparse series', () => {
    const c = compact(
      Float64Array.from([1, 2, 3, 4]),
      Float64Array.from([5, NaN, NaN, 8])
    );
    expect(Array.from(c.t)).toEqual([1, 4]);
    expect(Array.from(c.v)).toEqual([5, 8]);
  });
});

describe('chartSpecs', () => {
  const tick = (t: number, gpus: number[]): Tick => ({
    t,
    gpus: gpus.map(gpu => ({
      gpu,
      util_pct: 90,
      mem_used_bytes: 2 ** 33,
      power_w: 500
    })),
    host: { host_cpu_pct: 25, host_mem_pct: 40, host_mem_used_bytes: 2 ** 32 }
  });

  it('shows the host CPU and memory when there is no GPU', () => {
    const store = new MonitorStore(100);
    store.add(tick(1, []));
    const specs = chartSpecs(store);
    expect(specs.map(s => s.key)).toEqual(['host-cpu', 'host-mem']);
    expect(specs[1].now).toBe('40% · 4 GiB');
  });

  it('shows utilisation, memory, power, clock and PCIe per GPU', () => {
    const store = new MonitorStore(100);
    store.setStatus({
      type: 'monitor.status',
      running: true,
      source: 'nvml',
      reason: null,
      hz: 10,
      capacity: 100,
      gpus: [
        {
          index: 0,
          name: 'H200',
          memory_total_bytes: 141 * 2 ** 30,
          power_limit_w: 700
        }
      ],
      t: 0
    } as MonitorStatusMsg);
    store.add(tick(1, [0]));
    const specs = chartSpecs(store);
    expect(specs.map(s => s.key)).toEqual([
      'util',
      'mem',
      'power',
      'sm',
      'pcie'
    ]);
    expect(specs[0].series.map(s => s.key)).toEqual(['gpu0', 'cpu']);
    expect(specs[1].yMax).toBe(141);
    expect(specs[2].yMax).toBe(700);
    expect(specs[0].now).toBe('90%');
    const two = new MonitorStore(100);
    two.add(tick(1, [0, 1]));
    expect(chartSpecs(two)[0].now).toBe('GPU 0 90% · GPU 1 90%');
  });
});
