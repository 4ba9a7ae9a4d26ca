/**
 * The browser's gate for reports: every report that reaches a renderer (kernel message, pasted
 * file, HTML export) goes through `validateReport` or `parseReport` first.
 *
 * Both return a result instead of throwing, because every caller has to show the failure to the
 * user anyway (a report card that says what is wrong), and a union makes that branch impossible
 * to forget:
 *
 *   const result = parseReport(text);
 *   if (!result.ok) { show(result.error); return; }
 *   render(result.report);
 *
 * `error` is one line a user can act on, starting with the field it names; `path` is that field
 * alone (`findings[0].severity`, or `(root)`), in the same notation as the Python reader
 * (python_pkg/gpusight/report_schema.py), so both sides name a bad field the same way.
 */
import type { ErrorObject } from 'ajv';

import type { GpusightReport } from './generated/report';
import { validate as schemaValidate } from './generated/validate';
import {
  SCHEMA_MAJOR,
  SCHEMA_MINOR,
  SCHEMA_VERSION
} from './generated/version';

/** A report that passed the version check and the schema. */
export interface ReportValid {
  ok: true;
  report: GpusightReport;
}

/** Why a report was refused: `error` is the message to show, `path` the field it names. */
export interface ReportInvalid {
  ok: false;
  error: string;
  path: string;
}

export type ReportValidation = ReportValid | ReportInvalid;

export { SCHEMA_MAJOR, SCHEMA_MINOR, SCHEMA_VERSION };

/** The root, as the Python reader names it. */
export const ROOT_PATH = '(root)';

/** The generated validator, typed: ajv's standalone output carries no types of its own. */
type SchemaValidator = ((data: unknown) => boolean) & {
  errors?: ErrorObject[] | null;
};

const validator = schemaValidate as unknown as SchemaValidator;

/** At most this many allowed values are listed in an enum error (the finding catalogue is long). */
const MAX_LISTED_VALUES = 8;

/**
 * Check `data` against the report schema this build reads.
 *
 * The version is checked first, so that a report from a newer gpusight says "upgrade" instead of
 * listing every field it does not know.
 */
export function validateReport(data: unknown): ReportValidation {
  const versionError = checkVersion(data);
  if (versionError) {
    return versionError;
  }
  if (validator(data)) {
    return { ok: true, report: data as GpusightReport };
  }
  return describeErrors(data, validator.errors ?? []);
}

/**
 * Parse JSON text (a pasted or embedded report) and validate it.
 *
 * A leading byte-order mark and surrounding whitespace are ignored, since files saved by some
 * editors carry them.
 */
export function parseReport(text: string): ReportValidation {
  const trimmed = text.replace(/^\uFEFF/, '').trim();
  if (trimmed === '') {
    return invalid('no report: the text is empty', ROOT_PATH);
  }
  let data: unknown;
  try {
    data = JSON.parse(trimmed);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    return invalid(
      `not valid JSON (${reason}): paste the whole report file, as written by gpusight`,
      ROOT_PATH
    );
  }
  return validateReport(data);
}

function invalid(error: string, path: string): ReportInvalid {
  return { ok: false, error, path };
}

/** Mirrors `check_version` in python_pkg/gpusight/report_schema.py, message for message. */
function checkVersion(data: unknown): ReportInvalid | null {
  if (!isObject(data)) {
    return invalid(
      `report must be a JSON object, got ${jsonTypeName(data)}`,
      ROOT_PATH
    );
  }
  const version = data['schema_version'];
  if (typeof version !== 'string') {
    return invalid(
      'schema_version is missing: this is not a gpusight report',
      'schema_version'
    );
  }
  const match = /^(\d+)\.(\d+)$/.exec(version);
  if (!match) {
    return invalid(
      `schema_version ${JSON.stringify(version)} is not MAJOR.MINOR`,
      'schema_version'
    );
  }
  const major = Number(match[1]);
  const minor = Number(match[2]);
  if (
    major > SCHEMA_MAJOR ||
    (major === SCHEMA_MAJOR && minor > SCHEMA_MINOR)
  ) {
    return invalid(
      `report uses schema ${version}, newer than this gpusight reads (${SCHEMA_VERSION}): ` +
        'upgrade gpusight (pip install -U gpusight)',
      'schema_version'
    );
  }
  if (major < SCHEMA_MAJOR) {
    return invalid(
      `report uses schema ${version}, older than this gpusight reads (${SCHEMA_VERSION})`,
      'schema_version'
    );
  }
  return null;
}

/** One ajv error, resolved to the field it is about. */
interface FieldError {
  /** Path segments; numbers are array indices. */
  segments: (string | number)[];
  keyword: string;
  message: string;
  schemaPath: string;
}

/**
 * `run: {}` fails inside the Run branch of `Run | null` and also "must be null": once the deeper
 * errors say what is wrong, the other branch's complaint is noise.
 */
function isLosingBranch(e: FieldError, all: FieldError[]): boolean {
  if (!e.schemaPath.includes('/oneOf/')) {
    return false;
  }
  const path = formatPath(e.segments);
  return all.some(
    other =>
      other.segments.length > e.segments.length &&
      formatPath(other.segments.slice(0, e.segments.length)) === path
  );
}

/**
 * Turn ajv's list into one message naming the most specific field, as the Python reader does:
 * the deepest error wins, and a count says how many more there are.
 */
function describeErrors(data: unknown, errors: ErrorObject[]): ReportInvalid {
  if (errors.length === 0) {
    return invalid('report does not match the schema', ROOT_PATH);
  }
  const fieldErrors = errors.map(err => toFieldError(data, err));
  const depth = Math.max(...fieldErrors.map(e => e.segments.length));
  // Among the deepest, a oneOf summary says less than the branch errors beside it.
  const deepest = fieldErrors.filter(e => e.segments.length === depth);
  const specific = deepest.filter(e => e.keyword !== 'oneOf');
  const chosen = (specific.length ? specific : deepest)[0];
  const samePath = deepest.filter(
    e => formatPath(e.segments) === formatPath(chosen.segments)
  );
  let message = chosen.message;
  // `run: 5` fails both "must be object" and "must be null": say "must be object or null".
  const typeErrors = samePath.filter(e => e.keyword === 'type');
  if (chosen.keyword === 'type' && typeErrors.length > 1) {
    const types = typeErrors.map(e => e.message.replace(/^must be /, ''));
    message = `must be ${[...new Set(types)].join(' or ')}`;
  }
  const counted = new Set(
    fieldErrors
      .filter(e => e.keyword !== 'oneOf' && !isLosingBranch(e, fieldErrors))
      // A merged type error counts once.
      .map(
        e =>
          `${formatPath(e.segments)}\u0000${e.keyword === 'type' ? 'type' : e.message}`
      )
  );
  const more = counted.size - 1;
  const path = formatPath(chosen.segments);
  const suffix = more > 0 ? ` (and ${more} more)` : '';
  return invalid(`${path}: ${message}${suffix}`, path);
}

function toFieldError(data: unknown, err: ErrorObject): FieldError {
  const segments = pointerSegments(data, err.instancePath);
  const params = err.params as Record<string, unknown>;
  const { schemaPath } = err;
  switch (err.keyword) {
    case 'required':
      // Name the missing field itself, not the object that lacks it.
      return {
        segments: [...segments, String(params.missingProperty)],
        keyword: err.keyword,
        schemaPath,
        message: 'required field is missing'
      };
    case 'additionalProperties':
      return {
        segments: [...segments, String(params.additionalProperty)],
        keyword: err.keyword,
        schemaPath,
        message: 'unknown field (must NOT have additional properties)'
      };
    case 'enum': {
      const allowed = (params.allowedValues as unknown[]) ?? [];
      const listed = allowed
        .slice(0, MAX_LISTED_VALUES)
        .map(v => JSON.stringify(v))
        .join(', ');
      const rest =
        allowed.length > MAX_LISTED_VALUES
          ? `, … ${allowed.length - MAX_LISTED_VALUES} more`
          : '';
      return {
        segments,
        keyword: err.keyword,
        schemaPath,
        message: `${err.message ?? 'must be equal to one of the allowed values'}: ${listed}${rest}`
      };
    }
    case 'type': {
      // ajv writes a union as "must be number,null".
      const message = (err.message ?? 'has the wrong type').replace(
        /,/g,
        ' or '
      );
      return { segments, keyword: err.keyword, message, schemaPath };
    }
    default:
      return {
        segments,
        keyword: err.keyword,
        schemaPath,
        message: err.message ?? `fails ${err.keyword}`
      };
  }
}

/**
 * Split a JSON pointer into segments, looking at the data to tell an array index (`[0]`) from an
 * object key that happens to be digits (`params["0"]`).
 */
function pointerSegments(data: unknown, pointer: string): (string | number)[] {
  if (pointer === '') {
    return [];
  }
  const out: (string | number)[] = [];
  let node: unknown = data;
  for (const raw of pointer.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(node) && /^\d+$/.test(key)) {
      out.push(Number(key));
      node = node[Number(key)];
    } else {
      out.push(key);
      node = isObject(node) ? node[key] : undefined;
    }
  }
  return out;
}

/** `findings[0].evidence[1].source.line`; keys that are not identifiers are quoted. */
export function formatPath(segments: readonly (string | number)[]): string {
  let out = '';
  for (const seg of segments) {
    if (typeof seg === 'number') {
      out += `[${seg}]`;
    } else if (/^[A-Za-z_$][\w$]*$/.test(seg)) {
      out += out ? `.${seg}` : seg;
    } else {
      out += `[${JSON.stringify(seg)}]`;
    }
  }
  return out || ROOT_PATH;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function jsonTypeName(value: unknown): string {
  if (value === null) {
    return 'null';
  }
  if (Array.isArray(value)) {
    return 'array';
  }
  return typeof value;
}
