import { describe, expect, it } from 'vitest';
import type { Finding } from '../report';
import { sortFindings } from './findings';

function finding(id: string, share: number, basis = 'estimated'): Finding {
  return {
    id,
    severity: 'critical',
    title: id,
    evidence: [],
    impact: {
      basis,
      text: '',
      recoverable_pct: share,
      speedup: 1 / (1 - share / 100)
    },
    fix: { text: 'fix' }
  } as Finding;
}

describe('sortFindings', () => {
  it('puts the model left on the CPU first, as the kernel side does, then the largest impact', () => {
    const host = finding('load.cpu_preprocessing', 46.3);
    const placement = finding('code.cpu_model', 42.9);
    const small = finding('load.small_batch', 20);
    expect(sortFindings([host, small, placement]).map(f => f.id)).toEqual([
      'code.cpu_model',
      'load.cpu_preprocessing',
      'load.small_batch'
    ]);
    expect(sortFindings([small, host]).map(f => f.id)).toEqual([
      'load.cpu_preprocessing',
      'load.small_batch'
    ]);
  });

  it('puts a debugging switch the steps ran with before the figures it distorted', () => {
    const host = finding('load.cpu_preprocessing', 46.3);
    const anomaly = finding('cfg.anomaly_detection', 0);
    const blocking = finding('env.launch_blocking', 0);
    expect(sortFindings([host, anomaly, blocking]).map(f => f.id)).toEqual([
      'cfg.anomaly_detection',
      'env.launch_blocking',
      'load.cpu_preprocessing'
    ]);
    // As information (a check's "CUDA_LAUNCH_BLOCKING is unset") it leads nothing.
    const unset = { ...blocking, severity: 'info' } as Finding;
    expect(sortFindings([unset, host]).map(f => f.id)).toEqual([
      'load.cpu_preprocessing',
      'env.launch_blocking'
    ]);
  });
});
