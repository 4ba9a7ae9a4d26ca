/**
 * Utilisation timeline: NVML samples (GPU busy %, host CPU %) over the run, with step boundaries.
 * Zoomable on the time axis (d3-zoom: drag to pan, Ctrl/⌘+wheel or the controller to zoom), and
 * fast for long runs: each redraw decimates the visible window to the pixel width.
 */
import { axisBottom, axisLeft } from 'd3-axis';
import { scaleLinear } from 'd3-scale';
import type { Selection } from 'd3-selection';
import {
  zoom,
  zoomIdentity,
  zoomTransform,
  type D3ZoomEvent,
  type ZoomBehavior
} from 'd3-zoom';
import type { Sample } from '../report/generated/report';
import { decimateMinMax, lowerBound } from './decimate';
import { chartFrame } from './frame';
import { formatPct, formatSeconds, formatSecondsAt } from './format';
import { tickStep } from 'd3-array';

export interface TimelineSeries {
  key: string;
  label: string;
  /** Seconds since the run started, ascending. */
  t: Float64Array;
  /** 0-100; NaN where the sample had no value. */
  v: Float64Array;
}

export interface TimelineData {
  series: TimelineSeries[];
  stepStarts: number[];
}

export interface SeriesSummary {
  key: string;
  label: string;
  samples: number;
  mean: number;
  min: number;
  max: number;
  /** Share of samples under 10%: how often the device sat (nearly) idle. */
  idlePct: number;
}

function sortedColumns(rows: { t: number; v: number }[]): {
  t: Float64Array;
  v: Float64Array;
} {
  let sorted = true;
  for (let i = 1; i < rows.length; i++) {
    if (rows[i].t < rows[i - 1].t) {
      sorted = false;
      break;
    }
  }
  if (!sorted) {
    rows.sort((a, b) => a.t - b.t);
  }
  const t = new Float64Array(rows.length);
  const v = new Float64Array(rows.length);
  rows.forEach((r, i) => {
    t[i] = r.t;
    v[i] = r.v;
  });
  return { t, v };
}

/**
 * A sample's `cpu_pct` as a share of the machine, 0-100. The sampler reads psutil's process CPU %,
 * summed over cores (up to 100 × cores): divided by `cores` where the report says, else capped
 * at one core's 100 %. More than every core could give is not a reading (NaN).
 */
export function cpuShare(
  raw: number | null | undefined,
  cores: number | null
): number {
  if (typeof raw !== 'number' || !Number.isFinite(raw) || raw < 0) {
    return NaN;
  }
  if (!cores || cores < 1) {
    return Math.min(100, raw);
  }
  return raw > 100 * cores * 1.05 ? NaN : Math.min(100, raw / cores);
}

/** Whether a series has one value to draw. */
function hasData(v: Float64Array): boolean {
  return v.some(x => !Number.isNaN(x));
}

/** "Host CPU (of 16 cores)": what the CPU line is a share of. */
function cpuLabel(cores: number | null): string {
  return cores && cores >= 1
    ? `Host CPU (of ${cores} ${cores === 1 ? 'core' : 'cores'})`
    : 'Host CPU (of one core)';
}

/**
 * One series per GPU (busy %), plus host CPU % when the samples carry it; only series with data
 * (a CPU-only run's samples name no GPU reading, and draw no GPU line). `cores`: the machine's
 * `cpu_count`, which the CPU readings are shared over.
 */
export function timelineSeries(
  samples: Sample[],
  cores: number | null = null
): TimelineSeries[] {
  const byGpu = new Map<number, { t: number; v: number }[]>();
  const cpu: { t: number; v: number }[] = [];
  // Host CPU is one number per instant, repeated on each GPU's samples: take the lowest GPU's.
  let cpuGpu = Infinity;
  for (const s of samples) {
    cpuGpu = Math.min(cpuGpu, s.gpu ?? 0);
  }
  for (const s of samples) {
    const gpu = s.gpu ?? 0;
    let rows = byGpu.get(gpu);
    if (!rows) {
      rows = [];
      byGpu.set(gpu, rows);
    }
    rows.push({ t: s.t, v: s.util_pct ?? NaN });
    if (gpu === cpuGpu) {
      cpu.push({ t: s.t, v: cpuShare(s.cpu_pct, cores) });
    }
  }
  const multi = byGpu.size > 1;
  const out: TimelineSeries[] = [...byGpu.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([gpu, rows]) => ({
      key: `gpu${gpu}`,
      label: multi ? `GPU ${gpu} busy` : 'GPU busy',
      ...sortedColumns(rows)
    }));
  const cpuSeries = {
    key: 'cpu',
    label: cpuLabel(cores),
    ...sortedColumns(cpu)
  };
  // The first reading is the counter's priming window (under a millisecond, so one 10 ms
  // clock tick of CPU reads as thousands of %): never a measurement.
  cpuSeries.v[0] = NaN;
  return [...out, cpuSeries].filter(s => hasData(s.v));
}

export function summariseSeries(s: TimelineSeries): SeriesSummary {
  let n = 0;
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  let idle = 0;
  for (let i = 0; i < s.v.length; i++) {
    const x = s.v[i];
    if (Number.isNaN(x)) {
      continue;
    }
    n++;
    sum += x;
    min = Math.min(min, x);
    max = Math.max(max, x);
    if (x < 10) {
      idle++;
    }
  }
  return {
    key: s.key,
    label: s.label,
    samples: n,
    mean: n ? sum / n : NaN,
    min: n ? min : NaN,
    max: n ? max : NaN,
    idlePct: n ? (idle / n) * 100 : NaN
  };
}

/** Builds an SVG path through the points, breaking the line at NaN values. */
export function linePath(
  t: ArrayLike<number>,
  v: ArrayLike<number>,
  x: (t: number) => number,
  y: (v: number) => number
): { d: string; points: number } {
  let d = '';
  let pen = false;
  let points = 0;
  for (let i = 0; i < t.length; i++) {
    const value = v[i];
    if (Number.isNaN(value)) {
      pen = false;
      continue;
    }
    d += `${pen ? 'L' : 'M'}${x(t[i]).toFixed(1)},${y(value).toFixed(1)}`;
    pen = true;
    points++;
  }
  return { d, points };
}

/** A series in words, never "mean NaN%": a series without samples says so. */
export function seriesText(s: SeriesSummary): string {
  if (!s.samples) {
    return `${s.label}: no samples`;
  }
  return (
    `${s.label}: ${s.samples} samples, mean ${formatPct(s.mean)}, ` +
    `below 10% in ${formatPct(s.idlePct)} of samples`
  );
}

/** The chart's description: each series, the time shown, the steps. */
export function timelineText(data: TimelineData, seconds: number): string {
  const series = data.series.map(s => seriesText(summariseSeries(s)));
  return (
    (series.length ? series.join('; ') : 'No samples') +
    `. ${formatSeconds(seconds)} shown` +
    (data.stepStarts.length ? `, ${data.stepStarts.length} steps.` : '.')
  );
}

export interface TimelineOptions {
  width: number;
  height?: number;
  color: (key: string) => string;
  /** Called after every redraw with the visible time window. */
  onView?: (view: TimelineView) => void;
}

export interface TimelineView {
  t0: number;
  t1: number;
  /** Points drawn per series key after decimation. */
  points: Record<string, number>;
  /** Distance between x-axis ticks (s), for labels that match the axis. */
  tickStep: number;
  /** Step boundaries drawn (0 when too dense to see; zoom in). */
  steps: number;
  stepsHidden: boolean;
  /** Whether any series had more samples than pixels (drawn as band + mean). */
  decimated: boolean;
}

export interface TimelineController {
  zoomBy(factor: number): void;
  /** Pan by a fraction of the visible window (negative: back in time). */
  panBy(fraction: number): void;
  reset(): void;
  view(): TimelineView;
}

const MARGIN = { top: 18, right: 12, bottom: 26, left: 40 };

export function renderTimeline(
  container: Element,
  data: TimelineData,
  opts: TimelineOptions
): TimelineController {
  const width = opts.width;
  const height = opts.height ?? 200;
  const innerW = Math.max(10, width - MARGIN.left - MARGIN.right);
  const innerH = Math.max(10, height - MARGIN.top - MARGIN.bottom);
  let tMin = Infinity;
  let tMax = -Infinity;
  for (const s of data.series) {
    if (s.t.length) {
      tMin = Math.min(tMin, s.t[0]);
      tMax = Math.max(tMax, s.t[s.t.length - 1]);
    }
  }
  if (!Number.isFinite(tMin)) {
    tMin = 0;
    tMax = 1;
  }
  if (tMax <= tMin) {
    tMax = tMin + 1;
  }
  const description = timelineText(data, tMax - tMin);

  const svg = chartFrame(container, {
    width,
    height,
    label: 'Utilisation timeline',
    description,
    className: 'jp-GpusightTimelineChart'
  });
  const x0 = scaleLinear().domain([tMin, tMax]).range([0, innerW]);
  const y = scaleLinear().domain([0, 100]).range([innerH, 0]);

  // Clip to the plot so zoomed lines do not run over the axes.
  const clipId = `jp-GpusightTimelineChart-clip-${Math.random().toString(36).slice(2)}`;
  svg
    .append('clipPath')
    .attr('id', clipId)
    .append('rect')
    .attr('width', innerW)
    .attr('height', innerH);
  const root = svg
    .append('g')
    .attr('transform', `translate(${MARGIN.left},${MARGIN.top})`);
  const xAxisG = root
    .append('g')
    .attr('class', 'jp-GpusightChart-axis jp-mod-x')
    .attr('transform', `translate(0,${innerH})`);
  root
    .append('g')
    .attr('class', 'jp-GpusightChart-axis jp-mod-y')
    .call(
      axisLeft(y)
        .ticks(4)
        .tickFormat(d => `${d}%`)
    );
  const plot = root.append('g').attr('clip-path', `url(#${clipId})`);
  const stepsPath = plot
    .append('path')
    .attr('class', 'jp-GpusightTimelineChart-steps');
  const lines = data.series.map(s =>
    plot
      .append('path')
      .attr('class', `jp-GpusightTimelineChart-line jp-mod-${s.key}`)
      .attr('data-series', s.key)
      .style('fill', 'none')
      .style('stroke', opts.color(s.key))
  );
  const means = data.series.map(s =>
    plot
      .append('path')
      .attr('class', `jp-GpusightTimelineChart-mean jp-mod-${s.key}`)
      .attr('data-series', s.key)
      .style('fill', 'none')
      .style('stroke', opts.color(s.key))
  );
  const hint = root
    .append('text')
    .attr('class', 'jp-GpusightTimelineChart-hint')
    .attr('x', innerW)
    .attr('y', -6)
    .attr('text-anchor', 'end');
  // Transparent surface that receives the pan/zoom gestures.
  const surface = root
    .append('rect')
    .attr('class', 'jp-GpusightTimelineChart-surface')
    .attr('width', innerW)
    .attr('height', innerH)
    .style('fill', 'transparent');

  let current: TimelineView = {
    t0: tMin,
    t1: tMax,
    points: {},
    steps: 0,
    stepsHidden: false,
    decimated: false,
    tickStep: 1
  };
  const draw = (x: ReturnType<typeof scaleLinear<number, number>>): void => {
    const [t0, t1] = x.domain();
    const tickCount = Math.max(2, Math.floor(innerW / 90));
    const step = Math.abs(tickStep(t0, t1, tickCount));
    xAxisG.call(
      axisBottom(x)
        .ticks(tickCount)
        .tickFormat(d => formatSecondsAt(+d, step))
    );
    const points: Record<string, number> = {};
    let anyDecimated = false;
    data.series.forEach((s, i) => {
      const dec = decimateMinMax(s.t, s.v, t0, t1, Math.ceil(innerW));
      const path = linePath(dec.t, dec.v, x, y);
      // Decimated, the min/max line becomes a band (drawn faint) and the mean line says where
      // the series sits on average; undecimated, the line alone is exact.
      const decimated = dec.meanT.length > 0;
      anyDecimated = anyDecimated || decimated;
      lines[i]
        .attr('d', path.d)
        .attr('data-points', path.points)
        .classed('jp-mod-decimated', decimated);
      means[i].attr(
        'd',
        decimated ? linePath(dec.meanT, dec.meanV, x, y).d : ''
      );
      points[s.key] = path.points;
    });
    const lo = lowerBound(data.stepStarts, t0);
    const hi = lowerBound(data.stepStarts, t1);
    const visible = hi - lo;
    // Boundaries closer than 4 px merge into a grey wash: hide them until zoomed in.
    const stepsHidden = visible > innerW / 4;
    let d = '';
    if (!stepsHidden) {
      for (let i = lo; i < hi; i++) {
        d += `M${x(data.stepStarts[i]).toFixed(1)},0V${innerH}`;
      }
    }
    stepsPath.attr('d', d);
    hint.text(stepsHidden ? `${visible} steps: zoom in to see boundaries` : '');
    current = {
      t0,
      t1,
      points,
      steps: stepsHidden ? 0 : visible,
      stepsHidden,
      decimated: anyDecimated,
      tickStep: step
    };
    opts.onView?.(current);
  };

  // Zoom no further than ~20 ms of the run across the plot or 10 samples, whichever is wider.
  const n = Math.max(1, ...data.series.map(s => s.t.length));
  const maxK = Math.max(1, Math.min((tMax - tMin) / 0.02, n / 10));
  const behavior: ZoomBehavior<SVGRectElement, unknown> = zoom<
    SVGRectElement,
    unknown
  >()
    .scaleExtent([1, maxK])
    .extent([
      [0, 0],
      [innerW, innerH]
    ])
    .translateExtent([
      [0, 0],
      [innerW, innerH]
    ])
    // Plain wheel scrolls the notebook; Ctrl/⌘+wheel (and trackpad pinch) zooms.
    .filter(
      (event: MouseEvent | WheelEvent) =>
        !event.button &&
        (event.type !== 'wheel' || event.ctrlKey || event.metaKey)
    )
    .on('zoom', (event: D3ZoomEvent<SVGRectElement, unknown>) => {
      draw(event.transform.rescaleX(x0));
    });
  const surfaceSel = surface as unknown as Selection<
    SVGRectElement,
    unknown,
    null,
    undefined
  >;
  surfaceSel.call(behavior);
  draw(x0);

  return {
    zoomBy(factor: number) {
      behavior.scaleBy(surfaceSel, factor);
    },
    panBy(fraction: number) {
      const k = zoomTransform(surfaceSel.node() as SVGRectElement).k;
      behavior.translateBy(surfaceSel, (-fraction * innerW) / k, 0);
    },
    reset() {
      behavior.transform(surfaceSel, zoomIdentity);
    },
    view() {
      return current;
    }
  };
}
