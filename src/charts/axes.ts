/**
 * Axis rules every chart follows: whole-number ticks for counts (never "200m" workers), tick
 * labels without SI milli/micro prefixes for small values, and the unit a series carries in its
 * point labels read as the unit, not printed at every point.
 */
import { format, precisionFixed } from 'd3-format';
import { ticks as d3ticks, tickStep } from 'd3-array';
import type { Selection } from 'd3-selection';
import { approxTextWidth } from './frame';

/**
 * An x axis' title sits this far below the axis (its baseline), clear of the tick labels, which
 * end about 20 px down (d3's 9 px tick and padding, then one 11 px line).
 */
export const X_TITLE_DY = 30;

/** The bottom margin an x axis with a title needs: the title and its descenders. */
export const X_AXIS_SPACE = 36;

/** Whether every value is a whole number: worker counts, batch sizes, steps. */
export function isCount(values: number[]): boolean {
  return values.length > 0 && values.every(v => Number.isInteger(v));
}

/**
 * About `count` ticks over [lo, hi]; whole numbers only when `integer` (at least the two ends'
 * integers when the range is narrow, so a 1..2 worker sweep reads "1, 2").
 */
export function axisTicks(
  lo: number,
  hi: number,
  count: number,
  integer: boolean
): number[] {
  if (!(hi > lo)) {
    return [lo];
  }
  const raw = d3ticks(lo, hi, Math.max(1, count));
  if (!integer) {
    return raw;
  }
  const step = Math.max(1, Math.ceil(tickStep(lo, hi, Math.max(1, count))));
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) {
    out.push(v);
  }
  return out.length ? out : [Math.ceil(lo)];
}

/**
 * A tick label for `v` on an axis whose ticks are `step` apart: thousands grouped, SI only from
 * 10,000 up (12k, 1.5M), and as many decimals as the step needs below that (0.25, 0.5).
 */
export function formatTick(v: number, step: number): string {
  if (Math.abs(v) >= 10_000) {
    return format('.3~s')(v);
  }
  const digits = step > 0 && step < 1 ? precisionFixed(step) : 0;
  return format(`,.${digits}f`)(v);
}

/** The tick step of a list of ticks (0 for one tick). */
export function stepOf(ticks: number[]): number {
  return ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : 0;
}

/**
 * When every point of a series carries the same label ("ms", "samples/s"), that label is the
 * series' unit, not a name for each point: returns it, else null.
 */
export function unitFromLabels(
  points: { label?: string | null }[]
): string | null {
  if (points.length < 2) {
    return null;
  }
  const first = points[0].label;
  return first && points.every(p => p.label === first) ? first : null;
}

/**
 * Which of `labels` (centred at x, `width` px wide) to draw so no two overlap: greedily from the
 * left, keeping a 4 px gap. Returns the indices kept.
 */
export function nonOverlapping(
  labels: { x: number; width: number }[]
): number[] {
  const order = labels.map((l, i) => ({ ...l, i })).sort((a, b) => a.x - b.x);
  const kept: number[] = [];
  let right = -Infinity;
  for (const l of order) {
    if (l.x - l.width / 2 >= right + 4) {
      kept.push(l.i);
      right = l.x + l.width / 2;
    }
  }
  return kept.sort((a, b) => a - b);
}

/**
 * An x axis' end labels kept inside the frame: a label centred on a tick nearer an edge than
 * half its width (the live chart's "now" at the right edge, cut to "nov") is anchored at its
 * end (or start) instead. `left` and `right`: the margins beyond the plot, in px.
 */
export function keepTickLabelsInside(
  axis: Selection<SVGGElement, unknown, null, undefined>,
  x: (v: number) => number,
  innerW: number,
  left: number,
  right: number
): void {
  axis.selectAll<SVGTextElement, number>('.tick text').each(function (d) {
    const px = x(+d);
    const half = approxTextWidth(this.textContent ?? '', 11) / 2;
    if (px + half > innerW + right) {
      this.setAttribute('text-anchor', 'end');
    } else if (px - half < -left) {
      this.setAttribute('text-anchor', 'start');
    }
  });
}
