/** Number formatting shared by the charts and their text equivalents, so both say the same thing. */
import { format, precisionFixed } from 'd3-format';

const fixed0 = format(',.0f');
const fixed1 = format(',.1f');
const fixed2 = format(',.2f');

/** Milliseconds with precision that fits their size: 0.123 ms, 1.23 ms, 12.3 ms, 123 ms. */
export function formatMs(ms: number): string {
  const a = Math.abs(ms);
  if (a === 0) {
    return '0 ms';
  }
  if (a < 0.01) {
    return `${format('.2~r')(ms)} ms`;
  }
  if (a < 10) {
    return `${fixed2(ms)} ms`;
  }
  if (a < 100) {
    return `${fixed1(ms)} ms`;
  }
  return `${fixed0(ms)} ms`;
}

/** A share of a whole, 0-100: 45.1%, and "<0.1%" rather than a misleading 0.0%. */
export function formatPct(pct: number): string {
  if (pct > 0 && pct < 0.1) {
    return '<0.1%';
  }
  return `${pct >= 99.95 || pct === 0 ? fixed0(pct) : fixed1(pct)}%`;
}

/** A value in its own unit with 4 significant digits: 712.4 TFLOP/s, 24.8 GB/s, 4.12 µs. */
export function formatValue(value: number, unit: string): string {
  const digits =
    Math.abs(value) >= 1000 ? fixed0(value) : format('.4~r')(value);
  return unit ? `${digits} ${unit}` : digits;
}

/** A speedup factor: 1.84×. */
export function formatSpeedup(speedup: number): string {
  return `${fixed2(speedup)}×`;
}

/** Seconds on a time axis: 0.5 s, 12 s, 2 min 5 s. */
export function formatSeconds(s: number): string {
  if (Math.abs(s) < 120) {
    return `${format('.3~r')(s)} s`;
  }
  const m = Math.floor(s / 60);
  return `${m} min ${fixed0(s - m * 60)} s`;
}

/**
 * Seconds on an axis whose ticks are `step` s apart: as many decimals as the step needs, so
 * neighbouring ticks never read the same (zoomed into minute 2: 124.5 s, 125 s, 125.5 s).
 */
export function formatSecondsAt(s: number, step: number): string {
  if (step >= 1 && Math.abs(s) >= 120) {
    return formatSeconds(s);
  }
  const digits = step > 0 && step < 1 ? precisionFixed(step) : 0;
  return `${format(`,.${digits}f`)(s)} s`;
}
