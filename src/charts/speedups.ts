/**
 * What-if speedups: for each experiment actually run, a bar from 1× (no change) to the measured
 * speedup, with a whisker for the noise band. A slowdown draws to the left of 1×.
 */
import { axisBottom } from 'd3-axis';
import { scaleLinear, type ScaleLinear } from 'd3-scale';
import { select } from 'd3-selection';
import type { WhatIf } from '../report/generated/report';
import { chartFrame, LINE_HEIGHT, labelLines } from './frame';
import { format } from 'd3-format';
import { formatMs, formatSpeedup } from './format';
import { rowScope, SCOPE_TITLE, SCOPE_WORDS, type Scope } from './scope';

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
  /** False when the noise band reaches 1×: the gain may be noise ("not significant"). */
  significant: boolean;
  /** What the speedup covers (null: the report does not say). */
  scope: Scope | null;
  /** "1.84× end to end (±3% noise): 120 ms → 65.2 ms per step" */
  text: string;
}

/** "1.84×", with its scope where the report gives one: "1.84× end to end". */
export function speedupWords(speedup: number, scope: Scope | null): string {
  return formatSpeedup(speedup) + (scope ? ` ${SCOPE_WORDS[scope]}` : '');
}

/** The chart's title: what the speedups it draws cover. */
export function speedupsTitle(rows: SpeedupRow[]): string {
  const scopes = new Set(rows.flatMap(r => (r.scope ? [r.scope] : [])));
  const title = 'What-if speedups, measured';
  if (scopes.size > 1) {
    return `${title} end to end or compute only (each row says which)`;
  }
  const [only] = [...scopes];
  return only ? `${title} ${SCOPE_TITLE[only]}` : title;
}

/** Whether a speedup's noise band leaves 1× out (no band: any speedup other than 1×). */
export function isSignificant(
  speedup: number | null,
  band: [number, number] | null
): boolean {
  if (speedup === null) {
    return false;
  }
  return band ? band[0] > 1 || band[1] < 1 : speedup !== 1;
}

export function speedupRows(whatIfs: WhatIf[]): SpeedupRow[] {
  return whatIfs.map(w => {
    const scope = rowScope(w);
    // A skipped row states no result, whatever number it carries (one_gain.py).
    const speedup =
      typeof w.speedup === 'number' && w.speedup > 0 && !w.skipped
        ? w.speedup
        : null;
    const noise =
      typeof w.noise_pct === 'number' ? Math.abs(w.noise_pct) : null;
    const band: [number, number] | null =
      speedup !== null && noise !== null
        ? [speedup * (1 - noise / 100), speedup * (1 + noise / 100)]
        : null;
    const significant = isSignificant(speedup, band);
    let text: string;
    if (speedup === null) {
      text = w.skipped ? `skipped: ${w.skipped}` : 'not measured';
    } else {
      // "not significant" right after the number: a narrow chart cuts the end of the line.
      text =
        speedupWords(speedup, scope) +
        (significant ? '' : ', not significant') +
        (noise !== null ? ` (±${formatNoise(noise)}% noise)` : '');
      if (typeof w.before_ms === 'number' && typeof w.after_ms === 'number') {
        // "per step" unless the change names its own unit ("(time per sample)").
        const per = /\bper\b/.test(w.change) ? '' : ' per step';
        text += `: ${formatMs(w.before_ms)} → ${formatMs(w.after_ms)}${per}`;
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
      significant,
      scope,
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

/**
 * The shared x scale: from a little below the smallest value (at most 1×) to past the largest.
 * Noise bands count only up to twice the largest speedup and never below 0×: a ±340 % whisker
 * is drawn cut at the frame (with an open end) instead of squeezing every bar into a corner.
 */
export function speedupScale(
  rows: SpeedupRow[],
  width: number
): ScaleLinear<number, number> {
  const speedups = rows.flatMap(r => (r.speedup === null ? [] : [r.speedup]));
  const cap = Math.max(1, ...speedups) * 2;
  const values = rows.flatMap(r =>
    r.speedup === null
      ? []
      : [r.speedup, ...(r.band ?? []).map(b => Math.min(cap, Math.max(0, b)))]
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
  const lines = rows.map(r =>
    labelLines(r.change, r.text, width - MARGIN.left - MARGIN.right)
  );
  const tops: number[] = [];
  let y = MARGIN.top;
  lines.forEach(l => {
    tops.push(y);
    y += ROW + (l.length - 1) * LINE_HEIGHT;
  });
  const bottom = y;
  const height = bottom + MARGIN.bottom;
  const svg = chartFrame(container, {
    width,
    height,
    label: speedupsTitle(rows),
    description: rows.length
      ? rows.map(r => `${r.change}: ${r.text}`).join('; ') + '.'
      : 'No what-if experiments were run.',
    className: 'jp-GpusightSpeedupsChart'
  });
  const x = speedupScale(rows, width);
  const [x0, x1] = x.range();
  /** A value's x, held inside the frame. */
  const at = (v: number) => Math.min(x1, Math.max(x0, x(v)));
  const one = x(1);
  svg
    .append('g')
    .attr('class', 'jp-GpusightChart-axis jp-mod-x')
    .attr('transform', `translate(0,${bottom})`)
    .call(
      axisBottom(x)
        .ticks(Math.max(2, Math.floor(width / 100)))
        .tickFormat(d => `${format('~g')(+d)}×`)
    );
  // 1× (no change) marked across each bar, not through the labels above them.
  svg
    .append('path')
    .attr('class', 'jp-GpusightSpeedupsChart-baseline')
    .attr(
      'd',
      lines
        .map((l, i) => {
          const bar = tops[i] + 18 + (l.length - 1) * LINE_HEIGHT;
          return `M${one},${bar - 4}V${bar + BAR + 10}`;
        })
        .join('')
    );
  const row = svg
    .selectAll('g.jp-GpusightSpeedupsChart-row')
    .data(rows)
    .join('g')
    .attr(
      'class',
      d =>
        `jp-GpusightSpeedupsChart-row${d.skipped !== null ? ' jp-mod-skipped' : ''}` +
        (d.speedup === null || d.significant ? '' : ' jp-mod-insignificant')
    )
    .attr('transform', (_d, i) => `translate(0,${tops[i]})`);
  row
    .append('text')
    .attr('class', 'jp-GpusightSpeedupsChart-label')
    .attr('x', MARGIN.left)
    .attr('y', 11)
    .each(function (_d, i) {
      const text = select(this);
      lines[i].forEach((line, j) =>
        text
          .append('tspan')
          .attr('x', MARGIN.left)
          .attr('dy', j ? LINE_HEIGHT : 0)
          .text(line)
      );
    });
  row.append('title').text(d => `${d.change}: ${d.text}`);
  row.each(function (d, i) {
    if (d.speedup === null) {
      return;
    }
    const g = select(this);
    const top = 18 + (lines[i].length - 1) * LINE_HEIGHT;
    const end = at(d.speedup);
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
      // A whisker end past the frame is cut there and drawn open (no cap): "goes on".
      const [lo, hi] = d.band.map(at);
      const cutLo = x(d.band[0]) < x0;
      const cutHi = x(d.band[1]) > x1;
      const cap = (px: number) => `M${px},${top + 2}V${top + BAR - 2}`;
      g.append('path')
        .attr(
          'class',
          'jp-GpusightSpeedupsChart-whisker' +
            (cutLo || cutHi ? ' jp-mod-cut' : '')
        )
        .attr(
          'd',
          `M${lo},${top + BAR / 2}H${hi}` +
            (cutLo ? '' : cap(lo)) +
            (cutHi ? '' : cap(hi))
        );
    }
  });
}
