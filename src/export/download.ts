/**
 * The Export button's exporter: the same HTML file as `gpusight html`, built in the browser.
 *
 * The page template and the bundle come from ./page-assets.js, which scripts/build-standalone.mjs
 * writes next to the compiled module (lib/export/) from the very files it puts in the Python
 * package. It is imported lazily, so the labextension loads those ~200 KB only when someone
 * exports. No kernel and no server round trip: exporting works from a saved notebook whose kernel
 * is gone, from the sidebar, and offline.
 */
import type { GpusightReport } from '../report';
import { buildPage, reportTitle, sharedReport } from './page';
import { browserDownload, saveReportHtml } from './save';

/** The exported page for `report`, as `gpusight html` writes it. */
export async function exportHtml(report: GpusightReport): Promise<string> {
  const { PAGE_TEMPLATE, BUNDLE } = await import('./page-assets.js');
  return buildPage(
    PAGE_TEMPLATE,
    BUNDLE,
    { view: 'report', data: sharedReport(report) },
    reportTitle(report)
  );
}

/**
 * Save `report` as a self-contained HTML file through the browser's download; resolves to the
 * file's name.
 */
export function downloadReportHtml(report: GpusightReport): Promise<string> {
  return saveReportHtml(report, exportHtml, browserDownload);
}
