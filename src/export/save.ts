/**
 * Saving an exported report: its file name (one scheme, ./page's `exportFileName`) and where the
 * file goes. Apart from ./download so that tests can build the page without the build's assets.
 */
import type { GpusightReport } from '../report';
import { exportFileName } from './page';

/** The page for a report (./download's `exportHtml`). */
export type BuildPage = (report: GpusightReport) => Promise<string>;

/** A sink for the exported file: the browser's download, or a test's. */
export type SaveFile = (name: string, text: string) => void;

/** Saves through the browser's download. */
export function browserDownload(name: string, text: string): void {
  const url = URL.createObjectURL(
    new Blob([text], { type: 'text/html;charset=utf-8' })
  );
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  link.hidden = true;
  document.body.append(link);
  try {
    link.click();
  } finally {
    link.remove();
    // The download has started by now; the URL only has to outlive the click.
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  }
}

/** Builds `report`'s page and saves it under its file name; resolves to that name. */
export async function saveReportHtml(
  report: GpusightReport,
  build: BuildPage,
  save: SaveFile
): Promise<string> {
  const name = exportFileName(report);
  save(name, await build(report));
  return name;
}
