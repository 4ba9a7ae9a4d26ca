/**
 * Who can export a report as an HTML file. `<gs-report>` shows its Export button only when an
 * exporter is set: the labextension sets one when it activates (src/export/download.ts, which
 * builds the page in the browser from the bundle shipped with the extension); the exported page
 * itself sets none, since it already is the file. Kept apart from the exporter so that the
 * elements, and the standalone bundle, never pull in the page assets.
 *
 * Every Export button (the report's own, the sidebar's and its command) goes through
 * `exportReport`, so they write the same file under the same name.
 */
import type { GpusightReport } from '../report';

/**
 * Writes `report` somewhere the user gets it (a download) and resolves to the file's name;
 * rejects with a message to show.
 */
export type ReportExporter = (report: GpusightReport) => Promise<string>;

let current: ReportExporter | null = null;

export function setReportExporter(exporter: ReportExporter | null): void {
  current = exporter;
}

export function reportExporter(): ReportExporter | null {
  return current;
}

/** Exports `report` with the host's exporter; rejects where there is none. */
export function exportReport(report: GpusightReport): Promise<string> {
  return current
    ? current(report)
    : Promise.reject(new Error('nothing can export here'));
}
