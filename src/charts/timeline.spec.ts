// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';
import type { Sample } from '../report';
import {
  cpuShare,
  linePath,
  renderTimeline,
  summariseSeries,
  timelineSeries,
  timelineText
} from './timeline';

/** 50,000 samples of a starved GPU: 100% for one sample, 0% for the next. */
function starved(n: number): Sample[] {
  return Array.from({ length: n }, (_x, i) => ({
    t: i * 0.002,
    gpu: 0,
    util_pct: i % 2 ? 0 : 100,
    cpu_pct: 90
  }));
}

function pathPoints(d: string): { x: number; y: number }[] {
  return [...d.matchAll(/[ML](-?[\d.]+),(-?[\d.]+)/g)].map(m => ({
    x: +m[1],
    y: +m[2]
  }));
}

describe('timelineSeries', () => {
  it('makes one series per GPU plus the host CPU, sorted by time', () => {
    const series = timelineSeries([
      { t: 1, gpu: 1, util_pct: 10 },
      { t: 0, gpu: 0, util_pct: 50, cpu_pct: 20 },
      { t: 1, gpu: 0, util_pct: null, cpu_pct: 30 },
      { t: 0, gpu: 1, util_pct: 20 }
    ]);
    expect(series.map(s => s.key)).toEqual(['gpu0', 'gpu1', 'cpu']);
    expect([...series[1].t]).toEqual([0, 1]);
    expect([...series[1].v]).toEqual([20, 10]);
    expect(Number.isNaN(series[0].v[1])).toBe(true);
    expect(summariseSeries(series[0])).toMatchObject({ samples: 1, mean: 50 });
  });
});

describe('linePath', () => {
  it('breaks the line at missing values', () => {
    const { d, points } = linePath(
      [0, 1, 2, 3],
      [1, NaN, 3, 4],
      x => x,
      y => y
    );
    expect(points).toBe(3);
    expect(d).toBe('M0.0,1.0M2.0,3.0L3.0,4.0');
  });
});

describe('renderTimeline', () => {
  it('draws 50,000 samples decimated to the pixel width, keeping the sawtooth', () => {
    const el = document.createElement('div');
    const series = timelineSeries(starved(50_000));
    const width = 640;
    const ctl = renderTimeline(
      el,
      { series, stepStarts: [] },
      { width, height: 200, color: () => 'blue' }
    );
    const line = el.querySelector<SVGPathElement>('path[data-series="gpu0"]');
    expect(line).not.toBeNull();
    const pts = pathPoints(line?.getAttribute('d') ?? '');
    const plotWidth = width - 40 - 12;
    expect(pts.length).toBe(ctl.view().points.gpu0);
    // Decimated: at most 4 points per pixel column (+2 edge points), far fewer than 50,000...
    expect(pts.length).toBeLessThanOrEqual(plotWidth * 4 + 2);
    expect(pts.length).toBeGreaterThanOrEqual(plotWidth);
    // ...covering the whole plot width...
    expect(Math.min(...pts.map(p => p.x))).toBeCloseTo(0, 0);
    expect(Math.max(...pts.map(p => p.x))).toBeCloseTo(plotWidth, 0);
    // ...and still reaching both 0% and 100% (y pixels 0 and the plot height).
    const ys = new Set(pts.map(p => p.y));
    expect(ys.has(0)).toBe(true);
    expect(ys.has(200 - 18 - 26)).toBe(true);
    // The mean per column sits at 50% for a 0/100 sawtooth: y in the middle of the plot.
    const mean = pathPoints(
      el
        .querySelector('path.jp-GpusightTimelineChart-mean[data-series="gpu0"]')
        ?.getAttribute('d') ?? ''
    );
    expect(mean.length).toBeGreaterThan(plotWidth - 2);
    for (const p of mean) {
      expect(p.y).toBeCloseTo((200 - 18 - 26) / 2, -1);
    }
    expect(el.querySelector('desc')?.textContent).toContain(
      'GPU busy: 50000 samples, mean 50.0%'
    );
  });

  it('draws step boundaries when they are far enough apart, and zooms', () => {
    const el = document.createElement('div');
    const samples = starved(2_000); // 4 s
    const stepStarts = Array.from({ length: 40 }, (_x, i) => i * 0.1);
    const ctl = renderTimeline(
      el,
      { series: timelineSeries(samples), stepStarts },
      { width: 640, color: () => 'blue' }
    );
    const steps = el.querySelector('path.jp-GpusightTimelineChart-steps');
    expect((steps?.getAttribute('d') ?? '').match(/M/g)?.length).toBe(40);
    expect(ctl.view().steps).toBe(40);
    ctl.zoomBy(4);
    const v = ctl.view();
    expect(v.t1 - v.t0).toBeCloseTo(
      (samples[samples.length - 1].t - samples[0].t) / 4,
      6
    );
    expect(v.steps).toBeLessThan(40);
    ctl.panBy(-0.5);
    expect(ctl.view().t0).toBeLessThan(v.t0);
    ctl.reset();
    expect(ctl.view().t0).toBe(0);
  });

  it('hides boundaries that would merge into a wash and says why', () => {
    const el = document.createElement('div');
    const stepStarts = Array.from({ length: 5_000 }, (_x, i) => i * 0.02);
    const ctl = renderTimeline(
      el,
      { series: timelineSeries(starved(50_000)), stepStarts },
      { width: 640, color: () => 'blue' }
    );
    expect(ctl.view().stepsHidden).toBe(true);
    expect(
      el.querySelector('.jp-GpusightTimelineChart-hint')?.textContent
    ).toContain('zoom in');
  });
});

describe('host CPU', () => {
  // As the sampler wrote them: psutil's process CPU %, summed over cores; the first one read
  // over the sub-millisecond window after the counter was primed.
  const cpuOnly: Sample[] = [5497, 800, 1200, 1600].map((cpu, i) => ({
    t: i * 0.1,
    cpu_pct: cpu
  }));

  it("shares the readings over the machine's cores and drops the priming one", () => {
    const [cpu] = timelineSeries(cpuOnly, 16);
    expect(cpu.label).toBe('Host CPU (of 16 cores)');
    expect([...cpu.v]).toEqual([NaN, 50, 75, 100]);
    expect(cpuShare(5497, 16)).toBeNaN(); // more than 16 cores can give
    expect(cpuShare(1600, 16)).toBe(100);
  });

  it('caps the readings at one core when the core count is unknown', () => {
    const [cpu] = timelineSeries(cpuOnly);
    expect(cpu.label).toBe('Host CPU (of one core)');
    expect(Math.max(...[...cpu.v].filter(v => !Number.isNaN(v)))).toBe(100);
    expect(Number.isNaN(cpu.v[0])).toBe(true);
  });
});

describe('series with data only', () => {
  it('draws no GPU line (nor its legend entry) when no sample has a GPU reading', () => {
    const series = timelineSeries(
      [0, 1, 2].map(i => ({ t: i, cpu_pct: 100 })),
      4
    );
    expect(series.map(s => s.key)).toEqual(['cpu']);
    const gpuOnly = timelineSeries(
      [0, 1].map(i => ({ t: i, gpu: 0, util_pct: 50 })),
      4
    );
    expect(gpuOnly.map(s => s.key)).toEqual(['gpu0']);
  });

  it('never reads "NaN" to a screen reader', () => {
    const empty = {
      key: 'gpu0',
      label: 'GPU busy',
      t: Float64Array.from([0, 1]),
      v: Float64Array.from([NaN, NaN])
    };
    const text = timelineText({ series: [empty], stepStarts: [] }, 1);
    expect(text).toBe('GPU busy: no samples. 1 s shown.');
    expect(timelineText({ series: [], stepStarts: [] }, 1)).toBe(
      'No samples. 1 s shown.'
    );
    const el = document.createElement('div');
    renderTimeline(
      el,
      {
        series: timelineSeries([
          { t: 0, gpu: 0 },
          { t: 1, gpu: 0 }
        ]),
        stepStarts: []
      },
      { width: 400, color: () => 'blue' }
    );
    expect(el.querySelector('desc')?.textContent).not.toContain('NaN');
  });
});
