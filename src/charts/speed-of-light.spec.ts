import { describe, expect, it } from 'vitest';
import type { Run } from '../report';
import { formatFlops, formatRate, readSpeedOfLight } from './speed-of-light';

const base: Run = { steps: 10, step_time_ms: 4 };

describe('speed of light', () => {
  it('is absent without figures', () => {
    expect(readSpeedOfLight(base)).toBeNull();
    expect(readSpeedOfLight(null)).toBeNull();
  });

  it('draws a bar per ceiling of the main precision, measured first', () => {
    const v = readSpeedOfLight({
      ...base,
      speed_of_light: {
        flops_per_step: 1.2e12,
        flops_by_precision: { bf16: 1.14e12, fp32: 0.06e12 },
        precision: 'bf16',
        step_time_ms: 4,
        achieved_tflops: 300,
        ceilings: [
          {
            source: 'datasheet',
            precision: 'bf16',
            tflops: 989,
            label: 'H200 datasheet'
          },
          {
            source: 'measured',
            precision: 'bf16',
            tflops: 760,
            label: 'bf16 matmul'
          },
          {
            source: 'measured',
            precision: 'fp32',
            tflops: null,
            label: 'not measured'
          }
        ],
        mfu_pct: 39.5,
        mfu_datasheet_pct: 30.3
      }
    });
    expect(v?.flops).toBe('1.20 TFLOP');
    expect(v?.mix).toBe('bf16 95%, fp32 5%');
    expect(v?.reached).toBe('300 TFLOP/s over a 4.00 ms step');
    expect(v?.bars.map(b => b.source)).toEqual(['measured', 'datasheet']);
    expect(v?.bars[0].text).toBe(
      '39.5% of the bf16 rate measured on this GPU (760 TFLOP/s)'
    );
    expect(v?.unavailable).toBeNull();
  });

  it('says why there is no MFU, and draws no bar', () => {
    const v = readSpeedOfLight({
      ...base,
      speed_of_light: {
        flops_per_step: 6e7,
        flops_by_precision: { fp32: 6e7 },
        precision: 'fp32',
        step_time_ms: 5,
        achieved_tflops: 0.012,
        ceilings: [],
        mfu_pct: null,
        mfu_datasheet_pct: null,
        unavailable: 'the step ran on no GPU'
      }
    });
    expect(v?.bars).toEqual([]);
    expect(v?.reached).toBe('12.0 GFLOP/s over a 5.00 ms step');
    expect(v?.unavailable).toBe('the step ran on no GPU');
  });

  it('formats FLOPs and rates at their scale', () => {
    expect(formatFlops(3.4e15)).toBe('3.40 PFLOP');
    expect(formatFlops(5e9)).toBe('5.00 GFLOP');
    expect(formatRate(0.5)).toBe('500 GFLOP/s');
  });
});
