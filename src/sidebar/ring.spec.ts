import { describe, expect, it } from 'vitest';
import { NumberRing } from './ring';

describe('NumberRing', () => {
  it('keeps rows in order until full, then overwrites the oldest', () => {
    const r = new NumberRing(['t', 'v'] as const, 3);
    expect(r.size).toBe(0);
    expect(Array.from(r.column('t'))).toEqual([]);
    r.push({ t: 1, v: 10 });
    r.push({ t: 2, v: 20 });
    expect(Array.from(r.column('t'))).toEqual([1, 2]);
    r.push({ t: 3, v: 30 });
    r.push({ t: 4, v: 40 });
    r.push({ t: 5, v: 50 });
    expect(r.size).toBe(3);
    expect(Array.from(r.column('t'))).toEqual([3, 4, 5]);
    expect(Array.from(r.column('v'))).toEqual([30, 40, 50]);
    expect(r.at(0, 't')).toBe(3);
    expect(r.at(-1, 'v')).toBe(50);
    expect(r.at(3, 't')).toBeNaN();
    expect(r.at(-4, 't')).toBeNaN();
  });

  it('stores missing, null and non-finite values as NaN (a gap)', () => {
    const r = new NumberRing(['t', 'v'] as const, 4);
    r.push({ t: 1 });
    r.push({ t: 2, v: null });
    r.push({ t: 3, v: Infinity });
    r.push({ t: 4, v: 7 });
    expect(
      Array.from(r.column('v')).map(x => (Number.isNaN(x) ? 'gap' : x))
    ).toEqual(['gap', 'gap', 'gap', 7]);
  });

  it('resizes keeping the newest rows', () => {
    const r = new NumberRing(['t'] as const, 5);
    for (let i = 0; i < 8; i++) {
      r.push({ t: i });
    }
    r.resize(3);
    expect(r.capacity).toBe(3);
    expect(Array.from(r.column('t'))).toEqual([5, 6, 7]);
    r.resize(6);
    r.push({ t: 8 });
    expect(Array.from(r.column('t'))).toEqual([5, 6, 7, 8]);
    expect(r.storage.every(a => a.length === 6)).toBe(true);
    r.clear();
    expect(r.size).toBe(0);
  });

  it('refuses a capacity that is not a positive integer', () => {
    expect(() => new NumberRing(['t'], 0)).toThrow(RangeError);
    expect(() => new NumberRing(['t'], 2.5)).toThrow(RangeError);
    expect(() => new NumberRing(['t'], 2).resize(-1)).toThrow(RangeError);
  });
});
