/**
 * Benchmarks against their ceilings: one bar per benchmark on its own scale (units differ), with
 * the ceiling as a marker and the noise band as a whisker. A skipped benchmark says why.
 */
import { scaleLinear, type ScaleLinear } from 'd3-scale';
import { select } from 'd3-selection';
import type { Benchmark } from '../report/generated/report';
import { chartFrame, LINE_HEIGHT, labelLines } from './frame';
import { formatPct, formatValue } from './format';

export interface CeilingRow {
  id: string;
  label: string;
  unit: string;
  value: number | null;
  ceiling: number | null;
  ceilingSource: string | null;
  spread: [number, number] | null;
  /** value / ceiling * 100, when both are known. */
  pctOfCeiling: number | null;
  skipped: string | null;
  /** "612 TFLOP/s, 62% of 989 TFLOP/s" */
  text: string;
}

export function ceilingRows(benchmarks: Benchmark[]): CeilingRow[] {
  return benchmarks.map(b => {
    const value =
      typeof b.value === 'number' && Number.isFinite(b.value) ? b.value : null;
    const ceiling =
      typeof b.ceiling === 'number' && b.ceiling > 0 ? b.ceiling : null;
    const pct =
      value !== null && ceiling !== null ? (value / ceiling) * 100 : null;
    let text: string;
    if (value === null) {
      text = b.skipped ? `skipped: ${b.skipped}` : 'not measured';
    } else {
      text = formatValue(value, b.unit);
      if (ceiling !== null && pct !== null) {
        text += `, ${formatPct(pct)} of ${formatValue(ceiling, b.unit)}`;
      } else {
        text += ' (no reference)';
      }
    }
    return {
      id: b.id,
      label: b.label,
      unit: b.unit,
      value,
      ceiling,
      ceilingSource: b.ceiling_source ?? null,
      spread: b.spread ?? null,
      pctOfCeiling: pct,
      skipped: value === null ? (b.skipped ?? 'not measured') : null,
      text
    };
  });
}

export interface CeilingOptions {
  width: number;
  /** Fill for a bar: by how close it comes to its ceiling. */
  color: (row: CeilingRow) => string;
  ceilingColor: string;
}

const ROW = 44;
/** A row without a ceiling: its value as text, no bar (a bar needs a reference to read). */
const TEXT_ROW = 22;
const BAR = 14;
const PAD = 4;

/** Whether a row draws a bar: measured, against a ceiling. */
export function hasBar(row: CeilingRow): boolean {
  return row.value !== null && row.ceiling !== null;
}

/** The x scale of one row: zero to a little past the largest of value, ceiling and spread. */
export function rowScale(
  row: CeilingRow,
  width: number
): ScaleLinear<number, number> {
  const top =
    Math.max(row.value ?? 0, row.ceiling ?? 0, row.spread?.[1] ?? 0) * 1.05 ||
    1;
  return scaleLinear()
    .domain([0, top])
    .range([PAD, width - PAD]);
}

export function renderCeilings(
  container: Element,
  rows: CeilingRow[],
  opts: CeilingOptions
): void {
  const width = opts.width;
  const lines = rows.map(r => labelLines(r.label, r.text, width - 2 * PAD));
  const tops: number[] = [];
  let y = PAD;
  rows.forEach((r, i) => {
    tops.push(y);
    y += (hasBar(r) ? ROW : TEXT_ROW) + (lines[i].length - 1) * LINE_HEIGHT;
  });
  const height = y + PAD;
  const svg = chartFrame(container, {
    width,
    height,
    label: 'Benchmarks against their ceilings',
    description: rows.length
      ? rows.map(r => `${r.label}: ${r.text}`).join('; ') + '.'
      : 'No benchmarks were run.',
    className: 'jp-GpusightCeilingsChart'
  });
  const row = svg
    .selectAll('g.jp-GpusightCeilingsChart-row')
    .data(rows)
    .join('g')
    .attr(
      'class',
      d =>
        `jp-GpusightCeilingsChart-row${d.skipped !== null ? ' jp-mod-skipped' : ''}`
    )
    .attr('data-id', d => d.id)
    .attr('transform', (_d, i) => `translate(0,${tops[i]})`);
  row
    .append('text')
    .attr('class', 'jp-GpusightCeilingsChart-label')
    .attr('x', PAD)
    .attr('y', 13)
    .each(function (_d, i) {
      const text = select(this);
      lines[i].forEach((line, j) =>
        text
          .append('tspan')
          .attr('x', PAD)
          .attr('dy', j ? LINE_HEIGHT : 0)
          .text(line)
      );
    });
  row.append('title').text(d => `${d.label}: ${d.text}`);
  row.each(function (d, i) {
    if (!hasBar(d)) {
      return;
    }
    const g = select(this);
    const x = rowScale(d, width);
    const top = 18 + (lines[i].length - 1) * LINE_HEIGHT;
    // The track: the full scale, so a short bar reads as short.
    g.append('rect')
      .attr('class', 'jp-GpusightCeilingsChart-track')
      .attr('x', x(0))
      .attr('y', top)
      .attr('width', Math.max(0, width - 2 * PAD))
      .attr('height', BAR);
    if (d.value !== null) {
      g.append('rect')
        .attr('class', 'jp-GpusightCeilingsChart-bar')
        .attr('x', x(0))
        .attr('y', top)
        .attr('width', Math.max(1, x(d.value) - x(0)))
        .attr('height', BAR)
        .style('fill', opts.color(d))
        .append('title')
        .text(`${d.label}: ${d.text}`);
    }
    if (d.spread) {
      const [lo, hi] = d.spread;
      g.append('path')
        .attr('class', 'jp-GpusightCeilingsChart-spread')
        .attr(
          'd',
          `M${x(lo)},${top + BAR / 2}H${x(hi)}` +
            `M${x(lo)},${top + 3}V${top + BAR - 3}M${x(hi)},${top + 3}V${top + BAR - 3}`
        );
    }
    if (d.ceiling !== null) {
      const cx = x(d.ceiling);
      g.append('line')
        .attr('class', 'jp-GpusightCeilingsChart-ceiling')
        .attr('x1', cx)
        .attr('x2', cx)
        .attr('y1', top - 4)
        .attr('y2', top + BAR + 4)
        .style('stroke', opts.ceilingColor)
        .append('title')
        .text(
          `Ceiling ${formatValue(d.ceiling, d.unit)}` +
            (d.ceilingSource ? ` (${d.ceilingSource})` : '')
        );
    }
  });
}
