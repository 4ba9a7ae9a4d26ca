/**
 * Who can export a report as an HTML file. `<gs-report>` shows its Export button only when an
 * exporter is set: the labextension sets one when it activates (src/export/download.ts, which
 * builds the page in the browser from the bundle shipped with the extension); the exported page
 * itself sets none, since it already is the file. Kept apart from the exporter so that the
 * elements, and the standalone bundle, never pull in the page assets.
 */
import type { GpusightReport } from '../report';

/** Writes `report` somewhere the user gets it (a download); rejects with a message to show. */
export type ReportExporter = (report: GpusightReport) => Promise<void>;

let current: ReportExporter | null = null;

export function setReportExporter(exporter: ReportExporter | null): void {
  current = exporter;
}

export function reportExporter(): ReportExporter | null {
  return current;
}
