/** Exporting a report as one self-contained HTML file (the page itself: ./page). */
export { downloadReportHtml, exportHtml } from './download';
export {
  browserDownload,
  saveReportHtml,
  type BuildPage,
  type SaveFile
} from './save';
export {
  exportReport,
  reportExporter,
  setReportExporter,
  type ReportExporter
} from './exporter';
