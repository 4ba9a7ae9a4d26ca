/**
 * The report's lit elements. Importing this module defines them all; it knows nothing of Jupyter,
 * so the notebook widget, the sidebar and the exported HTML file draw with the same code.
 */
export { GsBenchmarks } from './benchmarks';
export { GsBreakdown } from './breakdown';
export { GsChecklist, checklistSummary } from './checklist';
export { GsError } from './error';
export { GsFindings, sortFindings } from './findings';
export {
  GsFixCard,
  INSERT_CELL_EVENT,
  copyText,
  type InsertCellDetail
} from './fix-card';
export { GsProgress } from './progress';
export { GsReport } from './report';
export { GsTimeline } from './timeline';
export { GsHostLines } from './host-lines';
export { GsVerdict } from './verdict';
export { GsWhatIfs } from './whatifs';
