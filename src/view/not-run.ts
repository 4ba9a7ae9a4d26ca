/**
 * What a report did not run, and why: skipped benchmarks and what-ifs (and the notes that only
 * repeat their ids), gathered for one "Not run, and why" disclosure instead of a row each.
 */
import type { GpusightReport } from '../report';

export interface NotRunGroup {
  reason: string;
  /** Labels of what the reason skipped. */
  items: string[];
}

export interface NotRun {
  groups: NotRunGroup[];
  /** Notes that say no more than the groups ("a, b skipped: reason"): left out of Notes. */
  notes: string[];
}

export function notRun(report: GpusightReport): NotRun {
  const byReason = new Map<string, string[]>();
  const add = (reason: string, what: string) => {
    const items = byReason.get(reason) ?? [];
    items.push(what);
    byReason.set(reason, items);
  };
  const ids = new Set<string>();
  for (const b of report.benchmarks) {
    if (b.value === null && b.skipped && (b.series?.length ?? 0) < 2) {
      add(b.skipped, b.label);
      ids.add(b.id);
    }
  }
  for (const w of report.what_if) {
    const partial = (w.series?.length ?? 0) > 1; // its sweep shows, with the reason
    if (w.skipped && !partial) {
      add(w.skipped, w.change);
    }
  }
  const notes = (report.notes ?? []).filter(n => {
    const m = /^(.+?) skipped: /.exec(n);
    return m !== null && m[1].split(/,\s*/).every(id => ids.has(id));
  });
  return {
    groups: [...byReason].map(([reason, items]) => ({ reason, items })),
    notes
  };
}

/** "1 Dec 2026, 14:50" in the reader's locale and time zone; the ISO text when unparseable. */
export function humanDate(iso: string, locale?: string): string {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) {
    return iso;
  }
  return new Date(t).toLocaleString(locale, {
    dateStyle: 'medium',
    timeStyle: 'short'
  });
}

/** "14:50" (the reader's locale): for lists of today's reports. */
export function humanTime(iso: string, locale?: string): string {
  const t = Date.parse(iso);
  return Number.isFinite(t)
    ? new Date(t).toLocaleTimeString(locale, { timeStyle: 'short' })
    : iso;
}
