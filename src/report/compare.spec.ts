import full from './fixtures/full-report.json';
import { describe, expect, it } from 'vitest';
import minimal from './fixtures/minimal-report.json';
import { compareReports, findingKey } from './compare';
import { beforeAfter } from './fixtures/before-after';
import type { GpusightReport } from './generated/report';

describe('compareReports', () => {
  it('computes the speedup, busy change and breakdown rows', () => {
    const { before, after } = beforeAfter(full);
    const c = compareReports(before, after);
    expect(c.stepBeforeMs).toBe(84.2);
    expect(c.stepAfterMs).toBe(42.1);
    expect(c.speedup).toBeCloseTo(2, 6);
    expect([c.busyBeforePct, c.busyAfterPct]).toEqual([37.8, 81.5]);
    expect([c.bottleneckBefore, c.bottleneckAfter]).toEqual([
      'memory_transfer',
      'compute'
    ]);
    // communication is 0 on both sides: no row.
    expect(c.breakdown.map(r => r.key)).toEqual([
      'compute',
      'data_wait',
      'copy',
      'sync_stall',
      'launch_overhead',
      'other_cpu'
    ]);
    const copy = c.breakdown.find(r => r.key === 'copy')!;
    expect(copy.beforeMs).toBe(26.4);
    expect(copy.afterMs).toBe(0.4);
    expect(copy.deltaMs).toBeCloseTo(-26, 6);
  });

  it('sorts findings into resolved, new and still there', () => {
    const { before, after } = beforeAfter(full);
    const c = compareReports(before, after);
    expect(c.findings.map(f => [f.status, f.key])).toEqual([
      ['resolved', 'code.pageable_copy@0'],
      ['new', 'load.amp_unused'],
      ['still', 'cfg.tf32_disabled'],
      ['still', 'env.launch_blocking']
    ]);
    const tf32 = c.findings.find(f => f.id === 'cfg.tf32_disabled')!;
    expect([tf32.severityBefore, tf32.severityAfter]).toEqual(['warn', 'info']);
  });

  it('tells the same finding on two GPUs apart', () => {
    expect(findingKey({ id: 'env.power_capped', gpu_index: 1 })).toBe(
      'env.power_capped@1'
    );
    expect(findingKey({ id: 'env.power_capped', gpu_index: null })).toBe(
      'env.power_capped'
    );
    const { before } = beforeAfter(full);
    const after = JSON.parse(JSON.stringify(before)) as GpusightReport;
    after.findings[0].gpu_index = 1;
    const statuses = compareReports(before, after).findings.map(f => f.status);
    expect(statuses.filter(s => s === 'resolved')).toHaveLength(1);
    expect(statuses.filter(s => s === 'new')).toHaveLength(1);
  });

  it('has no speedup or breakdown without runs', () => {
    const m = minimal as unknown as GpusightReport;
    const c = compareReports(m, m);
    expect(c.speedup).toBeNull();
    expect(c.breakdown).toEqual([]);
    expect(c.findings.every(f => f.status === 'still')).toBe(true);
  });
});
