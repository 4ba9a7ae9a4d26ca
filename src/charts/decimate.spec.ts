import { describe, expect, it } from 'vitest';
import { decimateMinMax, lowerBound } from './decimate';

/** A starved GPU: busy for one sample, idle for the next, over and over. */
function sawtooth(n: number): { t: Float64Array; v: Float64Array } {
  const t = new Float64Array(n);
  const v = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    t[i] = i * 0.001;
    v[i] = i % 2 === 0 ? 100 : 0;
  }
  return { t, v };
}

describe('lowerBound', () => {
  it('finds the first index at or above a value', () => {
    const t = [0, 1, 2, 2, 3];
    expect(lowerBound(t, 2)).toBe(2);
    expect(lowerBound(t, 2.5)).toBe(4);
    expect(lowerBound(t, -1)).toBe(0);
    expect(lowerBound(t, 9)).toBe(5);
  });
});

describe('decimateMinMax', () => {
  it('keeps at most four points per bucket and the full 0-100 range of a sawtooth', () => {
    const { t, v } = sawtooth(50_000);
    const out = decimateMinMax(t, v, 0, t[t.length - 1], 500);
    expect(out.t.length).toBeLessThanOrEqual(500 * 4 + 4);
    expect(out.t.length).toBeGreaterThan(500);
    expect(Math.min(...out.v)).toBe(0);
    expect(Math.max(...out.v)).toBe(100);
    // Every bucket still swings from 0 to 100: an average would have flattened it to 50.
    const perBucket = new Map<number, number[]>();
    const t1 = t[t.length - 1];
    out.t.forEach((x, i) => {
      const b = Math.min(499, Math.floor((x / t1) * 500));
      perBucket.set(b, [...(perBucket.get(b) ?? []), out.v[i]]);
    });
    for (const values of perBucket.values()) {
      expect(Math.min(...values)).toBe(0);
      expect(Math.max(...values)).toBe(100);
    }
  });

  it('gives the mean of each bucket: a 0/100 sawtooth sits at 50', () => {
    const { t, v } = sawtooth(50_000);
    const out = decimateMinMax(t, v, 0, t[t.length - 1], 500);
    expect(out.meanV.length).toBe(500);
    for (const m of out.meanV) {
      expect(m).toBeGreaterThan(45);
      expect(m).toBeLessThan(55);
    }
  });

  it('returns points in time order', () => {
    const { t, v } = sawtooth(10_000);
    const out = decimateMinMax(t, v, 0, 10, 100);
    for (let i = 1; i < out.t.length; i++) {
      expect(out.t[i]).toBeGreaterThanOrEqual(out.t[i - 1]);
    }
  });

  it('passes short series through unchanged', () => {
    const t = [0, 1, 2];
    const v = [10, 20, 30];
    expect(decimateMinMax(t, v, 0, 2, 100)).toEqual({
      t,
      v,
      meanT: [],
      meanV: []
    });
  });

  it('keeps only the visible window (plus one point either side)', () => {
    const { t, v } = sawtooth(10_000);
    const out = decimateMinMax(t, v, 2, 3, 400);
    expect(out.t[0]).toBeCloseTo(1.999, 6);
    expect(out.t[out.t.length - 1]).toBeCloseTo(3.0, 6);
  });

  it('keeps a gap where samples had no value', () => {
    const n = 20_000;
    const t = Float64Array.from({ length: n }, (_x, i) => i);
    const v = Float64Array.from({ length: n }, (_x, i) =>
      i >= 10_000 && i < 10_100 ? NaN : 50
    );
    const out = decimateMinMax(t, v, 0, n - 1, 1000);
    expect(out.v.some(Number.isNaN)).toBe(true);
    expect(out.meanV.some(Number.isNaN)).toBe(true);
  });
});
