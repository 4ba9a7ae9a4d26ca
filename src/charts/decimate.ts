/**
 * Decimation for long time series: per pixel column keep the first, lowest, highest and last point
 * (the M4 scheme). The drawn line is then pixel-identical to drawing every sample, so a GPU that
 * swings between 0% and 100% within one pixel still shows its full sawtooth instead of an average.
 */

export interface Decimated {
  t: number[];
  /** NaN marks a gap (a sample without a value); the line breaks there. */
  v: number[];
  /**
   * The mean of each bucket, at the bucket's mean time: where min/max shows a solid band (a GPU
   * swinging 0-100% many times per pixel), this line says where it sits on average. Empty when
   * the series was short enough to pass through undecimated.
   */
  meanT: number[];
  meanV: number[];
}

/** Index of the first element of sorted `t` that is >= value. */
export function lowerBound(t: ArrayLike<number>, value: number): number {
  let lo = 0;
  let hi = t.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (t[mid] < value) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/**
 * Decimate samples (t sorted ascending) within [t0, t1] into `buckets` columns. Keeps one point
 * either side of the window so the line runs to the edges. Points are returned in time order;
 * a bucket that holds a gap keeps the gap.
 */
export function decimateMinMax(
  t: ArrayLike<number>,
  v: ArrayLike<number>,
  t0: number,
  t1: number,
  buckets: number
): Decimated {
  const outT: number[] = [];
  const outV: number[] = [];
  const meanT: number[] = [];
  const meanV: number[] = [];
  const n = t.length;
  if (n === 0 || buckets < 1 || !(t1 > t0)) {
    return { t: outT, v: outV, meanT, meanV };
  }
  const start = Math.max(0, lowerBound(t, t0) - 1);
  const end = Math.min(n, lowerBound(t, t1) + 1);
  if (end - start <= buckets * 4) {
    // Few enough points to draw as they are.
    for (let i = start; i < end; i++) {
      outT.push(t[i]);
      outV.push(v[i]);
    }
    return { t: outT, v: outV, meanT, meanV };
  }
  const scale = buckets / (t1 - t0);
  let bucket = -Infinity;
  let first = -1;
  let last = -1;
  let minI = -1;
  let maxI = -1;
  let gap = -1;
  let sumT = 0;
  let sumV = 0;
  let count = 0;
  const flush = (): void => {
    if (first >= 0) {
      meanT.push(sumT / count);
      meanV.push(sumV / count);
      // Emit first/min/max/last in time order, without repeats.
      const idx = [first, minI, maxI, last].sort((a, b) => a - b);
      let prev = -1;
      for (const i of idx) {
        if (i !== prev) {
          outT.push(t[i]);
          outV.push(v[i]);
          prev = i;
        }
      }
    }
    if (gap >= 0) {
      // Keep the break in the line where the bucket had a sample without a value.
      outT.push(t[gap]);
      outV.push(NaN);
      meanT.push(t[gap]);
      meanV.push(NaN);
    }
  };
  for (let i = start; i < end; i++) {
    let b = Math.floor((t[i] - t0) * scale);
    if (b === buckets && t[i] <= t1) {
      // A sample exactly at the right edge belongs to the last column, not a column of its own.
      b = buckets - 1;
    }
    if (b !== bucket) {
      flush();
      bucket = b;
      first = last = minI = maxI = gap = -1;
      sumT = sumV = count = 0;
    }
    const value = v[i];
    if (Number.isNaN(value)) {
      if (gap < 0) {
        gap = i;
      }
      continue;
    }
    if (first < 0) {
      first = i;
      minI = i;
      maxI = i;
    }
    last = i;
    sumT += t[i];
    sumV += value;
    count++;
    if (value < v[minI]) {
      minI = i;
    }
    if (value > v[maxI]) {
      maxI = i;
    }
  }
  flush();
  return { t: outT, v: outV, meanT, meanV };
}
