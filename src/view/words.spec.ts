// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from 'vitest';
import full from '../report/fixtures/full-report.json';
import type { Evidence, GpusightReport } from '../report';
import { breakdownSegments } from '../charts/breakdown';
import { evidenceValue, unifyTimes } from './findings';
import { firstFinding, gainText } from './first-fix';
import './index';
import { cpuOnlyBuild, gpuInUse } from './machine';
import { humanDate, notRun } from './not-run';
import { verdictLabel, verdictSummary } from './verdict';

function clone<T>(x: T): T {
  return JSON.parse(JSON.stringify(x)) as T;
}

/** The full (GPU) report, moved onto a CPU-only torch build with no GPU. */
function cpuOnly(): GpusightReport {
  const r = clone(full) as unknown as GpusightReport;
  r.machine.gpus = [];
  r.machine.torch = { version: '2.13.0+cpu', cuda: null, hip: null };
  return r;
}

/** The CPU-only build's finding as the kernel side writes it. */
function buildFinding(): GpusightReport['findings'][number] {
  return {
    id: 'env.cpu_only_build',
    severity: 'critical',
    title: 'torch 2.13.0+cpu is a CPU-only build: it cannot use any GPU',
    evidence: [],
    impact: { basis: 'none', text: 'Nothing runs on a GPU.' },
    fix: { text: 'Install a CUDA build of torch.' }
  };
}

afterEach(() => document.body.replaceChildren());

describe('words that follow the machine', () => {
  it('says a measured change saves its share, an estimate up to it', () => {
    const f = {
      ...buildFinding(),
      id: 'load.input_bound' as const,
      impact: {
        basis: 'measured' as const,
        text: '',
        speedup: 1.41,
        recoverable_pct: 29.1
      }
    };
    expect(gainText(f)).toBe(
      'Measured: 1.41× faster, saves 29.1% of step time'
    );
    f.impact.basis = 'estimated' as 'measured';
    expect(gainText(f)).toBe(
      'Estimated: 1.41× faster, up to 29.1% of step time'
    );
    f.impact = { ...f.impact, basis: 'measured', speedup: 0.38 };
    f.impact.recoverable_pct = 0;
    expect(gainText(f)).toBe('Measured: 0.38× (slower)');
    f.impact.speedup = 0.98;
    expect(gainText(f)).toBe('Measured: 0.98×');
  });

  it('tells a CPU-only build and a CPU run from a GPU one', () => {
    const gpu = clone(full) as unknown as GpusightReport;
    expect(cpuOnlyBuild(gpu)).toBeNull();
    expect(gpuInUse(gpu)).toBe(true);
    expect(cpuOnlyBuild(cpuOnly())).toBe('2.13.0+cpu');
    expect(gpuInUse(cpuOnly())).toBe(false);
  });

  it('makes no GPU claim in the verdict or the breakdown of a CPU run', () => {
    const v = {
      bottleneck: 'compute' as const,
      gpu_busy_pct: null,
      summary: ''
    };
    expect(verdictLabel(v, true, null)).toBe('Compute (the GPU is busy)');
    expect(verdictLabel(v, false, null)).toBe('Compute (the CPU is busy)');
    const none = {
      bottleneck: 'none' as const,
      gpu_busy_pct: null,
      summary: 'Nothing.'
    };
    expect(verdictLabel(none, false, '2.13.0+cpu')).toBe(
      'CPU-only torch build'
    );
    expect(verdictSummary(none, '2.13.0+cpu')).toMatch(
      /^torch 2\.13\.0\+cpu is a CPU-only build/
    );
    const segments = breakdownSegments(
      { compute: 10, data_wait: 5 },
      15,
      false
    );
    expect(segments[0].label).toBe('Compute (CPU)');
    expect(breakdownSegments({ compute: 10 }, 10)[0].label).toBe('GPU compute');
  });

  it('puts the CPU-only build first on a machine with a GPU it leaves unused', async () => {
    const r = cpuOnly();
    r.machine.gpus = [{ index: 0, name: 'NVIDIA H200' }];
    r.findings.push(buildFinding());
    expect(firstFinding(r)?.id).toBe('env.cpu_only_build');
    // An older report without the finding still leads with the build.
    const older = cpuOnly();
    older.machine.gpus = r.machine.gpus;
    expect(firstFinding(older)?.title).toMatch(/CPU-only build/);
    const el = document.createElement('gs-report');
    el.report = r;
    document.body.appendChild(el);
    await el.updateComplete;
    const verdict = el.shadowRoot?.querySelector('gs-verdict');
    await verdict?.updateComplete;
    const vroot = verdict?.shadowRoot;
    expect(
      vroot?.querySelector('.jp-GpusightVerdict-busyValue')?.textContent
    ).toContain('no GPU in use');
    expect(
      vroot?.querySelector('.jp-GpusightVerdict-summary')?.textContent
    ).toMatch(/^torch 2\.13\.0\+cpu is a CPU-only build/);
    const first = el.shadowRoot?.querySelector('gs-first-fix');
    await first?.updateComplete;
    expect(first?.shadowRoot?.querySelector('h3')?.textContent).toContain(
      'CPU-only build'
    );
  });

  it("leads with the run's own fix on a machine without a GPU", async () => {
    const r = cpuOnly();
    r.findings.push(buildFinding());
    const gpu = clone(full) as unknown as GpusightReport;
    const own = firstFinding(gpu)?.id;
    expect(own).toBeTruthy();
    expect(firstFinding(r)?.id).toBe(own);
    expect(firstFinding(cpuOnly())?.id).toBe(own);
    const el = document.createElement('gs-report');
    el.report = r;
    document.body.appendChild(el);
    await el.updateComplete;
    const first = el.shadowRoot?.querySelector('gs-first-fix');
    await first?.updateComplete;
    expect(first?.shadowRoot?.querySelector('h3')?.textContent).not.toContain(
      'CPU-only build'
    );
    // The verdict still says the run had no GPU.
    const verdict = el.shadowRoot?.querySelector('gs-verdict');
    await verdict?.updateComplete;
    expect(
      verdict?.shadowRoot?.querySelector('.jp-GpusightVerdict-summary')
        ?.textContent
    ).toMatch(/^torch 2\.13\.0\+cpu is a CPU-only build/);
  });

  it('picks the largest measured impact first and marks the basis', () => {
    const r = clone(full) as unknown as GpusightReport;
    const f = firstFinding(r);
    expect(f?.id).toBe('code.pageable_copy');
    expect(f && gainText(f)).toMatch(/^(Measured|Estimated): /);
  });

  it('leads with a debugging switch over a critical finding, not with its note', () => {
    const r = clone(full) as unknown as GpusightReport;
    const own = firstFinding(r)?.id;
    const fix = { text: 'Turn it off outside debugging.' };
    const impact = { basis: 'none' as const, text: '' };
    const sw = {
      id: 'cfg.anomaly_detection' as const,
      title: 't',
      evidence: [],
      impact,
      fix
    };
    r.findings.push({ ...sw, severity: 'warn' });
    expect(firstFinding(r)?.id).toBe('cfg.anomaly_detection');
    r.findings[r.findings.length - 1].severity = 'info';
    expect(firstFinding(r)?.id).toBe(own);
  });
});

describe('clutter', () => {
  it('gathers skipped work under one reason, and drops notes that only repeat it', () => {
    const r = clone(full) as unknown as GpusightReport;
    r.benchmarks.push({
      id: 'matmul.fp32',
      label: 'fp32 matmul',
      value: null,
      unit: 'TFLOP/s',
      skipped: 'budget of 10 s spent before this benchmark'
    });
    r.notes = [
      'launch.eager, matmul.fp32 skipped: budget of 10 s spent before this benchmark',
      'nvcc not found'
    ];
    const out = notRun(r);
    expect(out.groups).toHaveLength(1);
    expect(out.groups[0].reason).toBe(
      'budget of 10 s spent before this benchmark'
    );
    expect(out.groups[0].items).toHaveLength(2);
    expect(out.groups[0].items).toContain('fp32 matmul');
    expect(out.notes).toEqual([r.notes[0]]);
  });

  it('shows evidence with units and sensible precision', () => {
    const ev = (value: Evidence['value'], unit?: string, label = 'x'): string =>
      evidenceValue({ label, value, unit });
    expect(ev(202.148, 'ms')).toBe('202 ms');
    expect(ev(2.286, undefined, 'speedup 2 workers')).toBe('2.29×');
    expect(ev(1585162)).toBe('1,585,162');
    expect(ev(3.0, 'x')).toBe('3.00×');
    expect(ev(1.5 * 2 ** 30, 'bytes')).toBe('1.5 GiB');
    expect(ev(12.3456, '%')).toBe('12.3%');
    expect(ev(true)).toBe('yes');
    expect(unifyTimes('ran 6.12x faster, 1.5x')).toBe('ran 6.12× faster, 1.5×');
  });

  it('writes dates for people', () => {
    expect(humanDate('2026-03-02T10:15:00Z', 'en-GB')).toMatch(/2 Mar 2026/);
    expect(humanDate('not a date')).toBe('not a date');
  });
});
