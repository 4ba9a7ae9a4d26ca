/**
 * Sweep curves: a benchmark or a what-if measured over a parameter (copy size vs GB/s, DataLoader
 * workers vs step time, batch size vs throughput). A log x axis when the sweep spans two decades.
 */
import { axisBottom, axisLeft } from 'd3-axis';
import { scaleLinear, scaleLog } from 'd3-scale';
import { format } from 'd3-format';
import {
  axisTicks,
  formatTick,
  isCount,
  nonOverlapping,
  stepOf,
  unitFromLabels,
  X_AXIS_SPACE,
  X_TITLE_DY
} from './axes';
import {
  approxTextWidth,
  chartFrame,
  fitText,
  LINE_HEIGHT,
  wrapLabel
} from './frame';
import { formatValue } from './format';

export interface SweepPoint {
  x: number;
  y: number | null;
  label?: string;
}

export interface SweepOptions {
  width: number;
  height?: number;
  title: string;
  xLabel: string;
  yLabel: string;
  color: string;
}

const MARGIN = { top: 10, right: 14, bottom: X_AXIS_SPACE, left: 52 };

/** Keep a label inside the plot: anchored at its end near the right edge, its start near the left. */
function anchorAt(px: number, innerW: number): 'start' | 'middle' | 'end' {
  if (px > innerW - 30) {
    return 'end';
  }
  return px < 30 ? 'start' : 'middle';
}

/** Whether the sweep should use a log x axis. */
export function useLogX(points: SweepPoint[]): boolean {
  const xs = points.map(p => p.x);
  const lo = Math.min(...xs);
  const hi = Math.max(...xs);
  return lo > 0 && hi / lo >= 100;
}

export function sweepText(
  points: SweepPoint[],
  xLabel: string,
  yLabel: string
): string {
  return points
    .map(p => {
      const x = p.label ?? `${xLabel} ${formatValue(p.x, '')}`;
      return `${x}: ${p.y === null ? 'failed' : formatValue(p.y, yLabel)}`;
    })
    .join('; ');
}

export function renderSweep(
  container: Element,
  points: SweepPoint[],
  opts: SweepOptions
): void {
  const width = opts.width;
  const height = opts.height ?? 180;
  const innerH = Math.max(10, height - MARGIN.top - MARGIN.bottom);
  // Points that all carry the same label carry their unit: it names the y axis instead, and each
  // point is labelled with its value.
  const unit = unitFromLabels(points);
  const yLabel = unit && !opts.yLabel ? unit : opts.yLabel;
  // A y title too long for the axis takes a second line, and the plot moves right to make room.
  const yLines = wrapLabel(yLabel, innerH);
  const left = MARGIN.left + (yLines.length - 1) * LINE_HEIGHT;
  const innerW = Math.max(10, width - left - MARGIN.right);
  const sorted = [...points]
    .filter(p => Number.isFinite(p.x))
    .map(p => (unit ? { x: p.x, y: p.y } : p))
    .sort((a, b) => a.x - b.x);
  const valueLabels = unit !== null;
  const svg = chartFrame(container, {
    width,
    height,
    label: opts.title,
    description: sorted.length
      ? sweepText(sorted, opts.xLabel, unit ?? yLabel) + '.'
      : 'No points.',
    className: 'jp-GpusightSweepChart'
  });
  const xs = sorted.map(p => p.x);
  const ys = sorted.flatMap(p =>
    p.y === null || !Number.isFinite(p.y) ? [] : [p.y]
  );
  const log = useLogX(sorted);
  const xDomain: [number, number] = xs.length
    ? [Math.min(...xs), Math.max(...xs)]
    : [0, 1];
  if (xDomain[0] === xDomain[1]) {
    xDomain[0] -= log ? xDomain[0] / 2 : 1;
    xDomain[1] += log ? xDomain[1] : 1;
  }
  const x = (log ? scaleLog() : scaleLinear())
    .domain(xDomain)
    .range([0, innerW]);
  const y = scaleLinear()
    .domain([0, (ys.length ? Math.max(...ys) : 1) * 1.1 || 1])
    .nice()
    .range([innerH, 0]);
  const yTicks = y.ticks(4);
  const root = svg
    .append('g')
    .attr('transform', `translate(${left},${MARGIN.top})`);
  const counts = isCount(xs);
  const xTicks = axisTicks(
    xDomain[0],
    xDomain[1],
    Math.max(2, Math.floor(innerW / 80)),
    counts
  );
  const xAxis = axisBottom(x)
    .tickValues(xTicks)
    .tickFormat(d => formatTick(+d, stepOf(xTicks)));
  if (log) {
    // Powers of ten only: a log axis labelled at 2, 3, 4... crowds out the numbers that matter.
    const decades = x
      .ticks()
      .filter(v => Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9);
    xAxis
      .tickValues(decades.length >= 2 ? decades : xs)
      .tickFormat(d => format('~s')(+d));
  }
  root
    .append('g')
    .attr('class', 'jp-GpusightChart-axis jp-mod-x')
    .attr('transform', `translate(0,${innerH})`)
    .call(xAxis);
  root
    .append('g')
    .attr('class', 'jp-GpusightChart-axis jp-mod-y')
    .call(
      axisLeft(y)
        .tickValues(yTicks)
        .tickFormat(d => formatTick(+d, stepOf(yTicks)))
    );
  root
    .append('text')
    .attr('class', 'jp-GpusightChart-axisLabel jp-mod-x')
    .attr('x', innerW / 2)
    .attr('y', innerH + X_TITLE_DY)
    .attr('text-anchor', 'middle')
    .text(fitText(opts.xLabel + (log ? ' (log)' : ''), innerW));
  root
    .append('text')
    .attr('class', 'jp-GpusightChart-axisLabel jp-mod-y')
    .attr('transform', `translate(${12 - left},${innerH / 2}) rotate(-90)`)
    .attr('text-anchor', 'middle')
    .selectAll('tspan')
    .data(yLines)
    .join('tspan')
    .attr('x', 0)
    .attr('dy', (_l, j) => (j ? LINE_HEIGHT : 0))
    .text(l => l);

  // The line breaks where a point failed (y null), so a gap never looks like a measurement.
  let d = '';
  let pen = false;
  for (const p of sorted) {
    if (p.y === null || !Number.isFinite(p.y)) {
      pen = false;
      continue;
    }
    d += `${pen ? 'L' : 'M'}${x(p.x).toFixed(1)},${y(p.y).toFixed(1)}`;
    pen = true;
  }
  root
    .append('path')
    .attr('class', 'jp-GpusightSweepChart-line')
    .attr('d', d)
    .style('fill', 'none')
    .style('stroke', opts.color);
  // A failed point (an OOM, a timeout) is marked on the x axis, labelled, rather than left out.
  root
    .selectAll('g.jp-GpusightSweepChart-failed')
    .data(sorted.filter(p => p.y === null || !Number.isFinite(p.y)))
    .join('g')
    .attr('class', 'jp-GpusightSweepChart-failed')
    .attr('transform', p => `translate(${x(p.x)},${innerH})`)
    .call(g =>
      g
        .append('path')
        .attr('d', 'M-4,-8L4,0M-4,0L4,-8')
        .style('stroke', opts.color)
    )
    .call(g =>
      g
        .append('text')
        .attr('y', -12)
        .attr('text-anchor', p => anchorAt(x(p.x), innerW))
        .text(p => p.label ?? 'failed')
    );
  const dot = root
    .selectAll('g.jp-GpusightSweepChart-point')
    .data(sorted.filter(p => p.y !== null && Number.isFinite(p.y)))
    .join('g')
    .attr('class', 'jp-GpusightSweepChart-point')
    .attr('transform', p => `translate(${x(p.x)},${y(p.y as number)})`);
  // Named points ("now", "1 MiB") carry their name; a series whose labels were its unit carries
  // its values. Labels that would overlap a neighbour's are left out (the tooltip has them all).
  const drawn = sorted.filter(p => p.y !== null && Number.isFinite(p.y));
  // A label is cut to the plot's width and centred over its point, moved in as far as it takes
  // to stay inside the plot: a long one ("num_workers=16, prefetch_factor=4") at the last point
  // of a narrow chart would otherwise reach past the card.
  const text = (p: SweepPoint) =>
    fitText(
      valueLabels ? formatValue(p.y as number, '') : (p.label ?? ''),
      innerW
    );
  const centre = (px: number, w: number) =>
    Math.min(Math.max(px, w / 2), innerW - w / 2);
  const labelled = drawn
    .map((p, i) => ({ p, i, w: approxTextWidth(text(p), 12) }))
    .filter(({ p }) => text(p));
  const keep = new Set(
    nonOverlapping(
      labelled.map(({ p, w }) => ({ x: centre(x(p.x), w), width: w }))
    ).map(j => labelled[j].i)
  );
  dot
    .filter((_p, i) => keep.has(i))
    .append('text')
    .attr('class', 'jp-GpusightSweepChart-pointLabel')
    .attr('y', -8)
    .attr('x', p => centre(x(p.x), approxTextWidth(text(p), 12)) - x(p.x))
    .attr('text-anchor', 'middle')
    .text(text);
  dot
    .append('circle')
    .attr('r', 3.5)
    .style('fill', opts.color)
    .append('title')
    .text(
      p =>
        `${p.label ?? `${opts.xLabel} ${p.x}`}: ${formatValue(p.y as number, unit ?? yLabel)}`
    );
}
