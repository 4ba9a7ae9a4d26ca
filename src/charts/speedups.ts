/**
 * What-if speedups: for each experiment actually run, a bar from 1× (no change) to the measured
 * speedup, with a whisker for the noise band. A slowdown draws to the left of 1×.
 */
import { axisBottom } from 'd3-axis';
import { scaleLinear, type ScaleLinear } from 'd3-scale';
import { select } from 'd3-selection';
import type { WhatIf } from '../report/generated/report';
import { chartFrame } from './frame';
import { format } from 'd3-format';
import { formatMs, formatSpeedup } from './format';

/** 1.8 -> "1.8", 2 -> "2", 12.34 -> "12". */
const formatNoise = format('.2~r');

export interface SpeedupRow {
  change: string;
  findingId: string | null;
  speedup: number | null;
  /** [low, high] speedup from the noise band, or null when the noise was not measured. */
  band: [number, number] | null;
  beforeMs: number | null;
  afterMs: number | null;
  noisePct: number | null;
  skipped: string | null;
  /** "1.84× (±3%): 120 ms → 65.2 ms" */
  text: string;
}

export function speedupRows(whatIfs: WhatIf[]): SpeedupRow[] {
  return whatIfs.map(w => {
    const speedup =
      typeof w.speedup === 'number' && w.speedup > 0 ? w.speedup : null;
    const noise =
      typeof w.noise_pct === 'number' ? Math.abs(w.noise_pct) : null;
    const band: [number, number] | null =
      speedup !== null && noise !== null
        ? [speedup * (1 - noise / 100), speedup * (1 + noise / 100)]
        : null;
    let text: string;
    if (speedup === null) {
      text = w.skipped ? `skipped: ${w.skipped}` : 'not measured';
    } else {
      text =
        formatSpeedup(speedup) +
        (noise !== null ? ` (±${formatNoise(noise)}% noise)` : '');
      if (typeof w.before_ms === 'number' && typeof w.after_ms === 'number') {
        text += `: ${formatMs(w.before_ms)} → ${formatMs(w.after_ms)} per step`;
      }
    }
    return {
      change: w.change,
      findingId: w.finding_id ?? null,
      speedup,
      band,
      beforeMs: w.before_ms ?? null,
      afterMs: w.after_ms ?? null,
      noisePct: noise,
      skipped: speedup === null ? (w.skipped ?? 'not measured') : null,
      text
    };
  });
}

export interface SpeedupOptions {
  width: number;
  /** Fill for a bar: faster, within noise, or slower. */
  color: (row: SpeedupRow) => string;
}

const ROW = 42;
const BAR = 14;
const MARGIN = { top: 4, right: 12, bottom: 24, left: 8 };

/** The shared x scale: from a little below the smallest value (at most 1×) to past the largest. */
export function speedupScale(
  rows: SpeedupRow[],
  width: number
): ScaleLinear<number, number> {
  const values = rows.flatMap(r =>
    r.speedup === null ? [] : [r.speedup, ...(r.band ?? [])]
  );
  const lo = Math.min(1, ...values);
  const hi = Math.max(1, ...values);
  const pad = (hi - lo) * 0.08 || 0.25;
  return scaleLinear()
    .domain([Math.max(0, lo - pad), hi + pad])
    .range([MARGIN.left, width - MARGIN.right]);
}

export function renderSpeedups(
  container: Element,
  rows: SpeedupRow[],
  opts: SpeedupOptions
): void {
  const width = opts.width;
  const height = MARGIN.top + rows.length * ROW + MARGIN.bottom;
  const svg = chartFrame(container, {
    width,
    height,
    label: 'What-if speedups, measured',
    description: rows.length
      ? rows.map(r => `${r.change}: ${r.text}`).join('; ') + '.'
      : 'No what-if experiments were run.',
    className: 'jp-GpusightSpeedupsChart'
  });
  const x = speedupScale(rows, width);
  const one = x(1);
  svg
    .append('g')
    .attr('class', 'jp-GpusightChart-axis jp-mod-x')
    .attr('transform', `translate(0,${MARGIN.top + rows.length * ROW})`)
    .call(
      axisBottom(x)
        .ticks(Math.max(2, Math.floor(width / 100)))
        .tickFormat(d => `${+d}×`)
    );
  // 1× (no change) marked across each bar, not through the labels above them.
  svg
    .append('path')
    .attr('class', 'jp-GpusightSpeedupsChart-baseline')
    .attr(
      'd',
      rows
        .map(
          (_r, i) =>
            `M${one},${MARGIN.top + i * ROW + 14}V${MARGIN.top + i * ROW + ROW}`
        )
        .join('')
    );
  const row = svg
    .selectAll('g.jp-GpusightSpeedupsChart-row')
    .data(rows)
    .join('g')
    .attr(
      'class',
      d =>
        `jp-GpusightSpeedupsChart-row${d.skipped !== null ? ' jp-mod-skipped' : ''}`
    )
    .attr('transform', (_d, i) => `translate(0,${MARGIN.top + i * ROW})`);
  row
    .append('text')
    .attr('class', 'jp-GpusightSpeedupsChart-label')
    .attr('x', MARGIN.left)
    .attr('y', 11)
    .text(d => `${d.change}: ${d.text}`);
  row.each(function (d) {
    if (d.speedup === null) {
      return;
    }
    const g = select(this);
    const top = 18;
    const end = x(d.speedup);
    g.append('rect')
      .attr('class', 'jp-GpusightSpeedupsChart-bar')
      .attr('x', Math.min(one, end))
      .attr('y', top)
      .attr('width', Math.max(1, Math.abs(end - one)))
      .attr('height', BAR)
      .style('fill', opts.color(d))
      .append('title')
      .text(`${d.change}: ${d.text}`);
    if (d.band) {
      const [lo, hi] = d.band.map(x);
      g.append('path')
        .attr('class', 'jp-GpusightSpeedupsChart-whisker')
        .attr(
          'd',
          `M${lo},${top + BAR / 2}H${hi}M${lo},${top + 2}V${top + BAR - 2}M${hi},${top + 2}V${top + BAR - 2}`
        );
    }
  });
}
