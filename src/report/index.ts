/** The report contract on the browser side: generated types, catalogue, and the validating gate. */
export type * from './generated/report';
export {
  BOTTLENECKS,
  BREAKDOWN_KEYS,
  FINDING_IDS
} from './generated/catalogue';
export {
  formatPath,
  parseReport,
  ROOT_PATH,
  SCHEMA_MAJOR,
  SCHEMA_MINOR,
  SCHEMA_VERSION,
  validateReport
} from './validate';
export type { ReportInvalid, ReportValid, ReportValidation } from './validate';
