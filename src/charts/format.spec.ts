import { describe, expect, it } from 'vitest';
import {
  formatMs,
  formatPct,
  formatSeconds,
  formatSecondsAt,
  formatSpeedup,
  formatValue
} from './format';

describe('format', () => {
  it('gives milliseconds a precision that fits their size', () => {
    expect(formatMs(0)).toBe('0 ms');
    expect(formatMs(1.234)).toBe('1.23 ms');
    expect(formatMs(26.44)).toBe('26.4 ms');
    expect(formatMs(1234.4)).toBe('1,234 ms');
    // The same cases as python_pkg/tests/test_durations.py: text and charts agree.
    expect(formatMs(0.0033)).toBe('0.0033 ms');
    expect(formatMs(0.005)).toBe('0.005 ms');
    expect(formatMs(0.033)).toBe('0.03 ms');
  });

  it('never rounds a small share down to zero', () => {
    expect(formatPct(0.04)).toBe('<0.1%');
    expect(formatPct(37.77)).toBe('37.8%');
    expect(formatPct(100)).toBe('100%');
  });

  it('formats values, speedups and seconds', () => {
    expect(formatValue(712.4, 'TFLOP/s')).toBe('712.4 TFLOP/s');
    expect(formatValue(12345.6, 'it/s')).toBe('12,346 it/s');
    expect(formatValue(5.1, 'GB/s')).toBe('5.1 GB/s');
    expect(formatSpeedup(1.414)).toBe('1.41×');
    expect(formatSeconds(12.5)).toBe('12.5 s');
    expect(formatSeconds(125)).toBe('2 min 5 s');
  });

  it('gives axis ticks the decimals their spacing needs', () => {
    const ticks = [124, 124.5, 125, 125.5].map(t => formatSecondsAt(t, 0.5));
    expect(ticks).toEqual(['124.0 s', '124.5 s', '125.0 s', '125.5 s']);
    expect(new Set(ticks).size).toBe(4);
    expect(formatSecondsAt(150, 20)).toBe('2 min 30 s');
    expect(formatSecondsAt(40, 10)).toBe('40 s');
  });
});
