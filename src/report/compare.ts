/**
 * Before/after comparison of two reports: step time and speedup, the breakdown side by side, and
 * which findings were resolved, are new, or are still there. Pure: `<gs-compare>` draws it, and
 * python_pkg/gpusight/compare.py computes the same for `gpusight diff` (same keys, same rules).
 */
import type { Finding, GpusightReport, Severity } from './generated/report';
import { BREAKDOWN_KEYS } from './generated/catalogue';

/** A category of the breakdown; the rows follow the schema's order, as the chart draws them. */
export type BreakdownCategory = (typeof BREAKDOWN_KEYS)[number];

export interface BreakdownRow {
  key: BreakdownCategory;
  beforeMs: number | null;
  afterMs: number | null;
  /** after - before, when both are known. */
  deltaMs: number | null;
}

export type FindingStatus = 'resolved' | 'new' | 'still';

export interface FindingChange {
  status: FindingStatus;
  /** `id`, or `id@gpu` for a finding about one GPU. */
  key: string;
  id: string;
  title: string;
  gpuIndex: number | null;
  severityBefore: Severity | null;
  severityAfter: Severity | null;
}

export interface Comparison {
  stepBeforeMs: number | null;
  stepAfterMs: number | null;
  /** before / after step time: 2 means twice as fast. Null without both runs. */
  speedup: number | null;
  busyBeforePct: number | null;
  busyAfterPct: number | null;
  bottleneckBefore: string;
  bottleneckAfter: string;
  breakdown: BreakdownRow[];
  /** Resolved first, then new, then still there; each in the reports' own order. */
  findings: FindingChange[];
}

/** A finding is the same finding in both reports when its id and its GPU match. */
export function findingKey(f: Pick<Finding, 'id' | 'gpu_index'>): string {
  return typeof f.gpu_index === 'number' ? `${f.id}@${f.gpu_index}` : f.id;
}

function busy(report: GpusightReport): number | null {
  return report.verdict.gpu_busy_pct ?? report.run?.gpu_busy_pct ?? null;
}

export function compareReports(
  before: GpusightReport,
  after: GpusightReport
): Comparison {
  const stepBeforeMs = before.run?.step_time_ms ?? null;
  const stepAfterMs = after.run?.step_time_ms ?? null;
  const speedup =
    stepBeforeMs !== null && stepAfterMs !== null && stepAfterMs > 0
      ? stepBeforeMs / stepAfterMs
      : null;

  const bb = before.run?.breakdown_ms;
  const ab = after.run?.breakdown_ms;
  const breakdown: BreakdownRow[] = [];
  if (bb || ab) {
    for (const key of BREAKDOWN_KEYS) {
      const b = bb ? (bb[key] ?? 0) : null;
      const a = ab ? (ab[key] ?? 0) : null;
      if (!b && !a) {
        continue;
      }
      breakdown.push({
        key,
        beforeMs: b,
        afterMs: a,
        deltaMs: a !== null && b !== null ? a - b : null
      });
    }
  }

  const afterByKey = new Map(after.findings.map(f => [findingKey(f), f]));
  const beforeByKey = new Map(before.findings.map(f => [findingKey(f), f]));
  const change = (
    status: FindingStatus,
    f: Finding,
    b: Finding | undefined,
    a: Finding | undefined
  ): FindingChange => ({
    status,
    key: findingKey(f),
    id: f.id,
    title: f.title,
    gpuIndex: typeof f.gpu_index === 'number' ? f.gpu_index : null,
    severityBefore: b?.severity ?? null,
    severityAfter: a?.severity ?? null
  });
  const resolved = before.findings
    .filter(f => !afterByKey.has(findingKey(f)))
    .map(f => change('resolved', f, f, undefined));
  const added = after.findings
    .filter(f => !beforeByKey.has(findingKey(f)))
    .map(f => change('new', f, undefined, f));
  const still = after.findings
    .filter(f => beforeByKey.has(findingKey(f)))
    .map(f => change('still', f, beforeByKey.get(findingKey(f)), f));

  return {
    stepBeforeMs,
    stepAfterMs,
    speedup,
    busyBeforePct: busy(before),
    busyAfterPct: busy(after),
    bottleneckBefore: before.verdict.bottleneck,
    bottleneckAfter: after.verdict.bottleneck,
    breakdown,
    findings: [...resolved, ...added, ...still]
  };
}
