/** Exporting a report as one self-contained HTML file (the page itself: ./page). */
export { downloadReportHtml, exportHtml } from './download';
export {
  reportExporter,
  setReportExporter,
  type ReportExporter
} from './exporter';
