/**
 * One small live chart: a few series over a sliding time window, with the cells that ran shaded.
 * Built from the timeline's parts (charts/: frame, M4 decimation, line paths, formats), so a long
 * history draws as fast as a short one: each redraw decimates the window to the pixel width.
 */
import { axisBottom, axisLeft } from 'd3-axis';
import { scaleLinear } from 'd3-scale';
import { keepTickLabelsInside } from '../charts/axes';
import { decimateMinMax } from '../charts/decimate';
import { formatSeconds } from '../charts/format';
import { chartFrame } from '../charts/frame';
import { linePath } from '../charts/timeline';
import type { CellSpan } from './store';

export interface LiveSeries {
  key: string;
  label: string;
  /** Kernel-clock seconds, ascending. */
  t: Float64Array;
  /** NaN breaks the line. */
  v: Float64Array;
  color: string;
  dashed?: boolean;
}

export interface LiveChartOptions {
  width: number;
  height: number;
  /** The visible window on the kernel clock; t1 is "now". */
  t0: number;
  t1: number;
  /** Top of the y axis; null: the data's maximum (at least `yMin`). */
  yMax: number | null;
  yMin?: number;
  format: (v: number) => string;
  label: string;
  description: string;
  cells: readonly CellSpan[];
}

export interface LiveChartResult {
  points: Record<string, number>;
  cells: number;
}

const MARGIN = { top: 6, right: 8, bottom: 18, left: 44 };

/** Drops NaN rows: for sparse series (PCIe is read every few ticks) the line should join up. */
export function compact(
  t: Float64Array,
  v: Float64Array
): { t: Float64Array; v: Float64Array } {
  let n = 0;
  for (let i = 0; i < v.length; i++) {
    if (!Number.isNaN(v[i])) {
      n++;
    }
  }
  if (n === v.length) {
    return { t, v };
  }
  const ot = new Float64Array(n);
  const ov = new Float64Array(n);
  let j = 0;
  for (let i = 0; i < v.length; i++) {
    if (!Number.isNaN(v[i])) {
      ot[j] = t[i];
      ov[j] = v[i];
      j++;
    }
  }
  return { t: ot, v: ov };
}

/** The largest finite value of the series within [t0, t1] (NaN if none). */
export function visibleMax(
  series: readonly LiveSeries[],
  t0: number,
  t1: number
): number {
  let max = NaN;
  for (const s of series) {
    for (let i = 0; i < s.t.length; i++) {
      const x = s.v[i];
      if (s.t[i] >= t0 && s.t[i] <= t1 && Number.isFinite(x) && !(x <= max)) {
        max = x;
      }
    }
  }
  return max;
}

export function renderLiveChart(
  container: Element,
  series: readonly LiveSeries[],
  opts: LiveChartOptions
): LiveChartResult {
  const innerW = Math.max(10, opts.width - MARGIN.left - MARGIN.right);
  const innerH = Math.max(10, opts.height - MARGIN.top - MARGIN.bottom);
  const t1 = opts.t1;
  const t0 = Math.min(opts.t0, t1 - 1e-3);
  const dataMax = visibleMax(series, t0, t1);
  const top =
    opts.yMax ??
    Math.max(opts.yMin ?? 1, Number.isFinite(dataMax) ? dataMax * 1.1 : 1);
  // The axis counts back from now (0 at the right edge), so its ticks fall on round seconds.
  const xs = scaleLinear()
    .domain([t0 - t1, 0])
    .range([0, innerW]);
  const x = (t: number): number => xs(t - t1);
  const y = scaleLinear().domain([0, top]).range([innerH, 0]);

  const svg = chartFrame(container, {
    width: opts.width,
    height: opts.height,
    label: opts.label,
    description: opts.description,
    className: 'jp-GpusightLiveChart'
  });
  const root = svg
    .append('g')
    .attr('transform', `translate(${MARGIN.left},${MARGIN.top})`);

  // Cells first, under the lines: a shaded band per cell run, open-ended while it runs.
  const cellsG = root.append('g').attr('class', 'jp-GpusightLiveChart-cells');
  let cellsDrawn = 0;
  for (const c of opts.cells) {
    const end = c.end ?? t1;
    if (end < t0 || c.start > t1) {
      continue;
    }
    const a = x(Math.max(t0, c.start));
    const b = x(Math.min(t1, end));
    cellsG
      .append('rect')
      .attr(
        'class',
        `jp-GpusightLiveChart-cell${c.end === null ? ' jp-mod-running' : ''}`
      )
      .attr('x', a.toFixed(1))
      .attr('y', 0)
      .attr('width', Math.max(1, b - a).toFixed(1))
      .attr('height', innerH)
      .append('title')
      .text(
        c.executionCount !== null
          ? `Cell [${c.executionCount}]: ${formatSeconds(end - c.start)}`
          : `Cell running: ${formatSeconds(end - c.start)}`
      );
    cellsDrawn++;
  }

  const xAxis = root
    .append('g')
    .attr('class', 'jp-GpusightChart-axis jp-mod-x')
    .attr('transform', `translate(0,${innerH})`)
    .call(
      axisBottom(xs)
        .ticks(Math.max(2, Math.floor(innerW / 60)))
        .tickFormat(d => (+d >= -1e-9 ? 'now' : `-${formatSeconds(-d)}`))
    );
  keepTickLabelsInside(xAxis, xs, innerW, MARGIN.left, MARGIN.right);
  root
    .append('g')
    .attr('class', 'jp-GpusightChart-axis jp-mod-y')
    .call(
      axisLeft(y)
        .ticks(3)
        .tickFormat(d => opts.format(+d))
    );

  const points: Record<string, number> = {};
  for (const s of series) {
    const dec = decimateMinMax(s.t, s.v, t0, t1, Math.ceil(innerW));
    const path = linePath(dec.t, dec.v, x, y);
    root
      .append('path')
      .attr(
        'class',
        `jp-GpusightLiveChart-line${s.dashed ? ' jp-mod-dashed' : ''}`
      )
      .attr('data-series', s.key)
      .attr('data-points', path.points)
      .attr('d', path.d)
      .style('fill', 'none')
      .style('stroke', s.color);
    points[s.key] = path.points;
  }
  return { points, cells: cellsDrawn };
}
