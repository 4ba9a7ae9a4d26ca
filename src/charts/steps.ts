/**
 * The step-time strip: one bar per step, its time on y, so a stall every k steps shows at a
 * glance as a comb of tall bars. The watch's periodic-stall finding (`run.stall`, optional)
 * marks the stalled steps and names the period in a caption; what ran between the steps
 * (`run.phases`: evaluation, checkpoints, epoch starts) marks the steps that held it.
 */
import { axisBottom, axisLeft } from 'd3-axis';
import { scaleLinear } from 'd3-scale';
import {
  axisTicks,
  formatTick,
  stepOf,
  X_AXIS_SPACE,
  X_TITLE_DY
} from './axes';
import type { Selection } from 'd3-selection';
import { approxTextWidth, chartFrame } from './frame';
import { formatMs, formatPct } from './format';

/** A periodic stall the watch found: every `periodSteps` steps, `stallMs` more. */
export interface StepStall {
  periodSteps: number;
  stallMs: number;
  sharePct: number;
  cause: string;
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/**
 * `run.stall`, read defensively: the field is optional and newer than some reports, so anything
 * malformed reads as no stall rather than breaking the report.
 */
export function readStall(run: unknown): StepStall | null {
  if (!run || typeof run !== 'object') {
    return null;
  }
  const s = (run as { stall?: unknown }).stall;
  if (!s || typeof s !== 'object') {
    return null;
  }
  const o = s as Record<string, unknown>;
  const period = num(o.period_steps);
  if (period === null || period < 2 || !Number.isInteger(period)) {
    return null;
  }
  return {
    periodSteps: period,
    stallMs: num(o.stall_ms) ?? 0,
    sharePct: num(o.share_pct) ?? 0,
    cause: typeof o.cause === 'string' ? o.cause : ''
  };
}

/** What ran between the steps: its kind, the steps (0-based) that held it, its period. */
export type PhaseKind = 'evaluation' | 'checkpoint' | 'epoch_start';

/** Each kind in words, as a bar's tooltip and the legend name it. */
export const PHASE_NAMES: Record<PhaseKind, string> = {
  evaluation: 'evaluation',
  checkpoint: 'checkpoint save',
  epoch_start: 'epoch start'
};

export interface StepPhase {
  kind: PhaseKind;
  steps: number[];
  periodSteps: number | null;
  msEach: number;
}

/** `run.phases`, read defensively as `run.stall` is. */
export function readPhases(run: unknown): StepPhase[] {
  if (!run || typeof run !== 'object') {
    return [];
  }
  const list = (run as { phases?: unknown }).phases;
  if (!Array.isArray(list)) {
    return [];
  }
  const out: StepPhase[] = [];
  for (const p of list) {
    if (!p || typeof p !== 'object') {
      continue;
    }
    const o = p as Record<string, unknown>;
    const kind =
      typeof o.kind === 'string' &&
      Object.prototype.hasOwnProperty.call(PHASE_NAMES, o.kind)
        ? (o.kind as PhaseKind)
        : null;
    const steps = Array.isArray(o.steps)
      ? o.steps.filter((s): s is number => Number.isInteger(s) && s >= 0)
      : [];
    if (kind === null || !steps.length) {
      continue;
    }
    const times = Array.isArray(o.times_ms)
      ? o.times_ms.filter((t): t is number => num(t) !== null)
      : [];
    const period = num(o.period_steps);
    out.push({
      kind,
      steps,
      periodSteps: period !== null && Number.isInteger(period) ? period : null,
      msEach: times.length ? times.reduce((a, b) => a + b, 0) / times.length : 0
    });
  }
  return out;
}

/** "An evaluation every 8 steps: 20.2 ms each (steps 3, 11)." */
export function phaseCaption(p: StepPhase): string {
  const what = {
    evaluation: 'An evaluation',
    checkpoint: 'A checkpoint save',
    epoch_start: "The DataLoader's workers starting"
  }[p.kind];
  const every = p.periodSteps ? ` every ${p.periodSteps} steps` : '';
  const shown = p.steps.slice(0, 4).map(s => String(s + 1));
  const more = p.steps.length > 4 ? ', ...' : '';
  const label = p.steps.length === 1 ? 'step' : 'steps';
  return `${what}${every}: ${formatMs(p.msEach)} each (${label} ${shown.join(', ')}${more}).`;
}

/**
 * The steps (0-based) the stall falls on: every `period`-th one, at the phase whose steps are
 * slowest on average (the series does not say where the first stall fell).
 */
export function stalledSteps(times: number[], period: number): number[] {
  if (period < 2 || times.length < period) {
    return [];
  }
  let best = 0;
  let bestMean = -Infinity;
  for (let phase = 0; phase < period; phase++) {
    let sum = 0;
    let n = 0;
    for (let i = phase; i < times.length; i += period) {
      sum += times[i];
      n++;
    }
    if (n && sum / n > bestMean) {
      bestMean = sum / n;
      best = phase;
    }
  }
  const out: number[] = [];
  for (let i = best; i < times.length; i += period) {
    out.push(i);
  }
  return out;
}

/** "Every 8th step stalls: +120 ms (14.2% of the run's time), DataLoader workers refill." */
export function stallCaption(stall: StepStall): string {
  const n = stall.periodSteps;
  const nth =
    n % 10 === 1 && n % 100 !== 11
      ? 'st'
      : n % 10 === 2 && n % 100 !== 12
        ? 'nd'
        : n % 10 === 3 && n % 100 !== 13
          ? 'rd'
          : 'th';
  return (
    `Every ${n}${nth} step stalls: +${formatMs(stall.stallMs)}` +
    (stall.sharePct > 0 ? ` (${formatPct(stall.sharePct)} of the time)` : '') +
    (stall.cause ? `, ${stall.cause}` : '') +
    '.'
  );
}

/**
 * What the strip draws against the steps the run counted, when they differ (a report may time
 * blocks of steps, or keep some of them): "8 timings drawn for 56 steps; the figures above
 * are over all 56." Null when there is one bar per step.
 */
export function drawnCaption(
  drawn: number,
  total: number | null | undefined
): string | null {
  if (typeof total !== 'number' || !(total > drawn)) {
    return null;
  }
  const what = drawn === 1 ? 'timing' : 'timings';
  return `${drawn} ${what} drawn for ${total} steps; the figures above are over all ${total}.`;
}

export interface StepsOptions {
  width: number;
  height?: number;
  color: string;
  stallColor: string;
  stall: StepStall | null;
  phaseColor?: string;
  phases?: StepPhase[];
  /** The steps the run counted (`run.steps`), where the bars may be fewer. */
  totalSteps?: number;
}

/** "56 steps", or "8 timings for 56 steps" where the bars are fewer than the steps. */
function countWords(drawn: number, total: number | undefined): string {
  return total !== undefined && total > drawn
    ? `${drawn} timings for ${total} steps`
    : `${drawn} steps`;
}

/** The top margin holds the legend row. */
const MARGIN = { top: 22, right: 8, bottom: X_AXIS_SPACE, left: 52 };

/** One legend entry: a dashed line (the median) or a bar swatch in its colour. */
export type StepsLegendItem =
  | { mark: 'median'; label: string }
  | { mark: 'bar'; label: string; color: string };

/** What the chart draws that a reader must be told: the median line, and marked bars. */
export function stepsLegend(
  median: number,
  stalled: number,
  phases: StepPhase[],
  opts: StepsOptions
): StepsLegendItem[] {
  const items: StepsLegendItem[] = [
    { mark: 'median', label: `median ${formatMs(median)}` }
  ];
  if (stalled) {
    items.push({ mark: 'bar', label: 'stalled', color: opts.stallColor });
  }
  const kinds = new Set(phases.map(p => p.kind));
  if (kinds.size) {
    const label = kinds.size > 1 ? 'between steps' : PHASE_NAMES[[...kinds][0]];
    items.push({
      mark: 'bar',
      label,
      color: opts.phaseColor ?? opts.stallColor
    });
  }
  return items;
}

/** One hover target: the steps [from, to) under it, and what its tooltip says. */
export interface StepTip {
  from: number;
  to: number;
  text: string;
}

/** "Step 6: 150 ms (stalled)"; a group of steps: "Steps 1–4: 20.0 ms to 150 ms". */
function tipText(
  times: number[],
  from: number,
  to: number,
  tag: (i: number) => string | null
): string {
  if (to - from === 1) {
    const t = tag(from);
    return `Step ${from + 1}: ${formatMs(times[from])}${t ? ` (${t})` : ''}`;
  }
  const slice = times.slice(from, to);
  return (
    `Steps ${from + 1}–${to}: ` +
    `${formatMs(Math.min(...slice))} to ${formatMs(Math.max(...slice))}`
  );
}

/**
 * The bars' tooltips: one per step, or one per group of neighbouring steps when there are more
 * steps than `columns` (pixels), so a 10,000-step run stays a few hundred targets.
 */
export function stepTips(
  times: number[],
  columns: number,
  tag: (i: number) => string | null
): StepTip[] {
  const per = Math.max(1, Math.ceil(times.length / Math.max(1, columns)));
  const out: StepTip[] = [];
  for (let from = 0; from < times.length; from += per) {
    const to = Math.min(times.length, from + per);
    out.push({ from, to, text: tipText(times, from, to, tag) });
  }
  return out;
}

/** What marks a step in its tooltip: its phase, else "stalled". */
function stepTag(
  phases: StepPhase[],
  stalled: Set<number>
): (i: number) => string | null {
  const kind = new Map<number, string>();
  for (const p of phases) {
    for (const i of p.steps) {
      kind.set(i, PHASE_NAMES[p.kind]);
    }
  }
  return i => kind.get(i) ?? (stalled.has(i) ? 'stalled' : null);
}

/** Transparent full-height targets over the bars, each with its tooltip. */
function drawTips(
  root: Selection<SVGGElement, unknown, null, undefined>,
  tips: StepTip[],
  x: (i: number) => number,
  innerH: number
): void {
  root
    .append('g')
    .attr('class', 'jp-GpusightStepsChart-tips')
    .selectAll('rect')
    .data(tips)
    .join('rect')
    .attr('class', 'jp-GpusightStepsChart-tip')
    .attr('x', d => x(d.from).toFixed(2))
    .attr('width', d => (x(d.to) - x(d.from)).toFixed(2))
    .attr('height', innerH)
    .style('fill', 'transparent')
    .append('title')
    .text(d => d.text);
}

const SWATCH = 14;

/** The legend, right-aligned above the plot; entries that do not fit the width are left out. */
function drawLegend(
  root: Selection<SVGGElement, unknown, null, undefined>,
  items: StepsLegendItem[],
  innerW: number
): void {
  const widths = items.map(i => SWATCH + 4 + approxTextWidth(i.label, 11));
  const gap = (j: number) => (j ? 12 : 0);
  let used = 0;
  let n = 0;
  while (
    n < items.length &&
    used + gap(n) + widths[n] <= innerW + MARGIN.left
  ) {
    used += gap(n) + widths[n];
    n++;
  }
  const kept = items.slice(0, n);
  let x = innerW - used;
  const g = root.append('g').attr('class', 'jp-GpusightStepsChart-legend');
  kept.forEach((item, j) => {
    const entry = g
      .append('g')
      .attr('class', 'jp-GpusightStepsChart-legendItem')
      .attr('transform', `translate(${x.toFixed(1)},-8)`);
    if (item.mark === 'median') {
      entry
        .append('path')
        .attr('class', 'jp-GpusightStepsChart-median')
        .attr('d', `M0,-4H${SWATCH}`);
    } else {
      entry
        .append('rect')
        .attr('y', -9)
        .attr('width', SWATCH)
        .attr('height', 9)
        .style('fill', item.color);
    }
    entry
      .append('text')
      .attr('x', SWATCH + 4)
      .text(item.label);
    x += widths[j] + gap(j + 1);
  });
}

export function renderSteps(
  container: Element,
  times: number[],
  opts: StepsOptions
): void {
  const width = opts.width;
  const height = opts.height ?? 160;
  const innerW = Math.max(10, width - MARGIN.left - MARGIN.right);
  const innerH = Math.max(10, height - MARGIN.top - MARGIN.bottom);
  const ok = times.map(t => (Number.isFinite(t) && t >= 0 ? t : 0));
  const between = new Set((opts.phases ?? []).flatMap(p => p.steps));
  // A phase's steps are known exactly: the stall's guessed ones give way to them.
  const stalled = new Set(
    (opts.stall ? stalledSteps(ok, opts.stall.periodSteps) : []).filter(
      i => !between.has(i)
    )
  );
  const sorted = [...ok].sort((a, b) => a - b);
  const median = sorted.length ? sorted[Math.floor(sorted.length / 2)] : 0;
  const svg = chartFrame(container, {
    width,
    height,
    label: 'Time of each step',
    description: ok.length
      ? `${countWords(ok.length, opts.totalSteps)}, median ${formatMs(median)}, slowest ${formatMs(sorted[sorted.length - 1])}.` +
        (opts.stall ? ` ${stallCaption(opts.stall)}` : '') +
        (opts.phases ?? []).map(p => ` ${phaseCaption(p)}`).join('')
      : 'No per-step times.',
    className: 'jp-GpusightStepsChart'
  });
  const x = scaleLinear()
    .domain([0, Math.max(1, ok.length)])
    .range([0, innerW]);
  const y = scaleLinear()
    .domain([0, Math.max(...ok, 0) || 1])
    .nice()
    .range([innerH, 0]);
  const root = svg
    .append('g')
    .attr('transform', `translate(${MARGIN.left},${MARGIN.top})`);
  const band = innerW / Math.max(1, ok.length);
  const gap = band > 4 ? 1 : 0;
  // One path per kind of bar: a run of 10,000 steps stays two elements, not 10,000.
  let plain = '';
  let marked = '';
  let phased = '';
  ok.forEach((t, i) => {
    const bx = x(i) + gap / 2;
    const bw = Math.max(0.5, band - gap);
    const top = y(t);
    const d = `M${bx.toFixed(2)},${innerH}V${top.toFixed(2)}h${bw.toFixed(2)}V${innerH}Z`;
    if (between.has(i)) {
      phased += d;
    } else if (stalled.has(i)) {
      marked += d;
    } else {
      plain += d;
    }
  });
  root
    .append('path')
    .attr('class', 'jp-GpusightStepsChart-bars')
    .attr('d', plain)
    .style('fill', opts.color);
  root
    .append('path')
    .attr('class', 'jp-GpusightStepsChart-bars jp-mod-stalled')
    .attr('d', marked)
    .attr('data-steps', stalled.size)
    .style('fill', opts.stallColor);
  if (between.size) {
    root
      .append('path')
      .attr('class', 'jp-GpusightStepsChart-bars jp-mod-phase')
      .attr('d', phased)
      .attr('data-steps', between.size)
      .style('fill', opts.phaseColor ?? opts.stallColor);
  }
  root
    .append('path')
    .attr('class', 'jp-GpusightStepsChart-median')
    .attr('d', `M0,${y(median)}H${innerW}`);
  drawLegend(
    root,
    stepsLegend(median, stalled.size, opts.phases ?? [], opts),
    innerW
  );
  const tag = stepTag(opts.phases ?? [], stalled);
  drawTips(root, stepTips(ok, Math.floor(innerW), tag), x, innerH);
  const yTicks = y.ticks(3);
  root
    .append('g')
    .attr('class', 'jp-GpusightChart-axis jp-mod-y')
    .call(
      axisLeft(y)
        .tickValues(yTicks)
        .tickFormat(d => formatTick(+d, stepOf(yTicks)))
    );
  const xTicks = axisTicks(
    0,
    Math.max(1, ok.length - 1),
    Math.max(2, Math.floor(innerW / 70)),
    true
  );
  root
    .append('g')
    .attr('class', 'jp-GpusightChart-axis jp-mod-x')
    .attr('transform', `translate(0,${innerH})`)
    .call(
      axisBottom(x)
        .tickValues(xTicks.map(v => v + 0.5))
        .tickFormat(d => String(Math.round(+d - 0.5) + 1))
    );
  root
    .append('text')
    .attr('class', 'jp-GpusightChart-axisLabel jp-mod-x')
    .attr('x', innerW / 2)
    .attr('y', innerH + X_TITLE_DY)
    .attr('text-anchor', 'middle')
    .text('Step');
  root
    .append('text')
    .attr('class', 'jp-GpusightChart-axisLabel jp-mod-y')
    .attr('transform', `translate(-40,${innerH / 2}) rotate(-90)`)
    .attr('text-anchor', 'middle')
    .text('ms');
}
