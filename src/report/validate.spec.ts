import { describe, expect, it } from 'vitest';

import schema from '../../python_pkg/gpusight/schema/report.schema.json';
import full from './fixtures/full-report.json';
import minimal from './fixtures/minimal-report.json';
import type { ReportValidation } from './index';
import {
  formatPath,
  parseReport,
  SCHEMA_MAJOR,
  SCHEMA_MINOR,
  SCHEMA_VERSION,
  validateReport
} from './index';

type Json = Record<string, any>;

/** A deep copy of a fixture, to break one field of. */
function copy(report: object): Json {
  return structuredClone(report) as Json;
}

function refused(result: ReportValidation): { error: string; path: string } {
  if (result.ok) {
    throw new Error('expected the report to be refused, but it passed');
  }
  return result;
}

describe('validateReport: valid reports', () => {
  it('accepts a minimal report and returns it typed', () => {
    const result = validateReport(copy(minimal));
    expect(result.ok).toBe(true);
    if (result.ok) {
      expect(result.report.kind).toBe('check');
      expect(result.report.machine.gpus).toEqual([]);
      expect(result.report.run).toBeUndefined();
    }
  });

  it('accepts a full report with every part of the schema filled in', () => {
    const data = copy(full);
    const result = validateReport(data);
    expect(result).toEqual({ ok: true, report: data });
    if (result.ok) {
      expect(result.report.findings.map(f => f.severity)).toEqual([
        'critical',
        'warn',
        'info'
      ]);
      expect(result.report.run?.breakdown_ms?.copy).toBe(26.4);
    }
  });

  it("accepts a fix's notebook cell (1.2) and names a bad one's field", () => {
    const data = copy(full);
    const cell = {
      source: 'loader = DataLoader(ds)',
      patched: 'loader = DataLoader(ds, num_workers=2)',
      line: 1,
      end_line: 1,
      execution_count: 5,
      label: 'cell [5]'
    };
    data.findings[0].fix.cell = cell;
    const result = validateReport(data);
    expect(result.ok).toBe(true);
    if (result.ok) {
      expect(result.report.findings[0].fix.cell?.patched).toBe(cell.patched);
    }
    data.findings[0].fix.cell = { ...cell, line: 0 };
    expect(refused(validateReport(data)).path).toBe(
      'findings[0].fix.cell.line'
    );
    data.findings[0].fix.cell = { source: 'x' };
    expect(refused(validateReport(data)).error).toMatch(/patched/);
  });

  it('accepts run: null and torch: null (the schema allows both)', () => {
    const data = copy(full);
    data.run = null;
    data.machine.torch = null;
    expect(validateReport(data).ok).toBe(true);
  });

  it('the full fixture reaches every definition of the schema', () => {
    // If this fails after a schema change, extend fixtures/full-report.json.
    const defs = (schema as Json).definitions as Record<string, Json>;
    const seen = new Set<string>();
    visit(schema as Json, full, defs, seen);
    expect([...seen].sort()).toEqual(Object.keys(defs).sort());
  });
});

describe('validateReport: malformed reports name the field', () => {
  it('a missing required field, deep down', () => {
    const data = copy(full);
    delete data.verdict.summary;
    expect(refused(validateReport(data))).toEqual({
      ok: false,
      path: 'verdict.summary',
      error: 'verdict.summary: required field is missing'
    });
  });

  it('a missing top-level field', () => {
    const data = copy(minimal);
    delete data.machine;
    const { path, error } = refused(validateReport(data));
    expect(path).toBe('machine');
    expect(error).toBe('machine: required field is missing');
  });

  it('a wrong enum value in findings', () => {
    const data = copy(full);
    data.findings[1].severity = 'severe';
    const { path, error } = refused(validateReport(data));
    expect(path).toBe('findings[1].severity');
    expect(error).toBe(
      'findings[1].severity: must be equal to one of the allowed values: "info", "warn", "critical"'
    );
  });

  it('an unknown finding id lists a few allowed ids, not all of them', () => {
    const data = copy(full);
    data.findings[0].id = 'code.pageable_copies';
    const { path, error } = refused(validateReport(data));
    expect(path).toBe('findings[0].id');
    expect(error).toMatch(
      /^findings\[0\]\.id: must be equal to one of the allowed values: "env\.no_torch", .*, … \d+ more$/
    );
  });

  it('a wrong type', () => {
    const data = copy(full);
    data.run.steps = '50';
    expect(refused(validateReport(data))).toMatchObject({
      path: 'run.steps',
      error: 'run.steps: must be integer'
    });
  });

  it('a wrong type where null is allowed says both', () => {
    const data = copy(full);
    data.machine.gpus[0].power_limit_w = '700 W';
    expect(refused(validateReport(data))).toMatchObject({
      path: 'machine.gpus[0].power_limit_w',
      error: 'machine.gpus[0].power_limit_w: must be number or null'
    });
  });

  it('a wrong type for a nullable object (oneOf) merges the branches', () => {
    const data = copy(full);
    data.run = 5;
    expect(refused(validateReport(data))).toMatchObject({
      path: 'run',
      error: 'run: must be object or null'
    });
  });

  it('an error inside a nullable object names the inner field, not the oneOf', () => {
    const data = copy(full);
    data.run = { steps: 3 };
    expect(refused(validateReport(data))).toMatchObject({
      path: 'run.step_time_ms',
      error: 'run.step_time_ms: required field is missing'
    });
  });

  it('an extra property names the unknown field', () => {
    const data = copy(full);
    data.findings[0].evidence[0].source.column = 7;
    expect(refused(validateReport(data))).toMatchObject({
      path: 'findings[0].evidence[0].source.column',
      error:
        'findings[0].evidence[0].source.column: unknown field (must NOT have additional properties)'
    });
  });

  it('an out-of-range number', () => {
    const data = copy(full);
    data.verdict.gpu_busy_pct = 140;
    expect(refused(validateReport(data))).toMatchObject({
      path: 'verdict.gpu_busy_pct',
      error: 'verdict.gpu_busy_pct: must be <= 100'
    });
  });

  it('a spread with three numbers', () => {
    const data = copy(full);
    data.benchmarks[0].spread = [1, 2, 3];
    expect(refused(validateReport(data))).toMatchObject({
      path: 'benchmarks[0].spread',
      error: 'benchmarks[0].spread: must NOT have more than 2 items'
    });
  });

  it('keys that are not identifiers are quoted, digit keys are not taken for indices', () => {
    const data = copy(full);
    data.run.kernels['aten::copy_'] = { n: 3 };
    expect(refused(validateReport(data)).path).toBe(
      'run.kernels["aten::copy_"]'
    );

    const other = copy(full);
    other.what_if[0].params['0'] = [];
    expect(refused(validateReport(other)).path).toBe('what_if[0].params["0"]');
  });

  it('names the deepest problem first, in document order, and counts the others', () => {
    const data = copy(full);
    data.findings[0].severity = 'bad';
    data.checks[0].status = 'ok';
    data.kind = 'profile';
    const { error } = refused(validateReport(data));
    expect(error).toMatch(
      /^checks\[0\]\.status: must be .*"not_checked" \(and 2 more\)$/
    );
  });
});

describe('validateReport: version check comes first', () => {
  it('refuses a newer minor with a message that says to upgrade', () => {
    const data = copy(full);
    const newer = `${SCHEMA_MAJOR}.${SCHEMA_MINOR + 1}`;
    data.schema_version = newer;
    data.a_field_from_the_future = true;
    expect(refused(validateReport(data))).toEqual({
      ok: false,
      path: 'schema_version',
      error:
        `report uses schema ${newer}, newer than this gpusight reads (${SCHEMA_VERSION}): ` +
        'upgrade gpusight (pip install -U gpusight)'
    });
  });

  it('refuses a newer major', () => {
    const data = copy(minimal);
    data.schema_version = `${SCHEMA_MAJOR + 1}.0`;
    expect(refused(validateReport(data)).error).toContain(
      `report uses schema ${SCHEMA_MAJOR + 1}.0, newer than this gpusight reads`
    );
  });

  it('refuses an older major', () => {
    const data = copy(minimal);
    data.schema_version = `${SCHEMA_MAJOR - 1}.9`;
    expect(refused(validateReport(data)).error).toBe(
      `report uses schema ${SCHEMA_MAJOR - 1}.9, older than this gpusight reads (${SCHEMA_VERSION})`
    );
  });

  it('accepts its own version', () => {
    const data = copy(minimal);
    data.schema_version = `${SCHEMA_MAJOR}.${SCHEMA_MINOR}`;
    expect(validateReport(data).ok).toBe(true);
  });

  it('says "not a gpusight report" when schema_version is missing', () => {
    expect(refused(validateReport({ hello: 'world' }))).toEqual({
      ok: false,
      path: 'schema_version',
      error: 'schema_version is missing: this is not a gpusight report'
    });
  });

  it('refuses a version that is not MAJOR.MINOR', () => {
    const data = copy(minimal);
    data.schema_version = '1.0.2';
    expect(refused(validateReport(data)).error).toBe(
      'schema_version "1.0.2" is not MAJOR.MINOR'
    );
  });

  it.each([
    [null, 'null'],
    [[], 'array'],
    ['{}', 'string'],
    [42, 'number']
  ])('refuses %j: not an object', (value, name) => {
    expect(refused(validateReport(value))).toEqual({
      ok: false,
      path: '(root)',
      error: `report must be a JSON object, got ${name}`
    });
  });
});

describe('parseReport', () => {
  it('parses and validates report text, with a byte-order mark and whitespace', () => {
    const result = parseReport('\uFEFF\n  ' + JSON.stringify(full) + '\n');
    expect(result.ok).toBe(true);
  });

  it('says the text is not JSON', () => {
    const { error, path } = refused(parseReport('{"schema_version": "1.0",'));
    expect(path).toBe('(root)');
    expect(error).toMatch(
      /^not valid JSON \(.+\): paste the whole report file/
    );
  });

  it('says the text is empty', () => {
    expect(refused(parseReport('  \n')).error).toBe(
      'no report: the text is empty'
    );
  });

  it('passes schema errors through', () => {
    const data = copy(minimal);
    data.kind = 'nope';
    expect(refused(parseReport(JSON.stringify(data))).path).toBe('kind');
  });
});

describe('formatPath', () => {
  it('writes indices, identifiers and quoted keys', () => {
    expect(formatPath([])).toBe('(root)');
    expect(formatPath(['findings', 0, 'evidence', 2, 'value'])).toBe(
      'findings[0].evidence[2].value'
    );
    expect(formatPath(['machine', 'env', 'CUDA_VISIBLE_DEVICES'])).toBe(
      'machine.env.CUDA_VISIBLE_DEVICES'
    );
    expect(formatPath(['run', 'kernels', 'a b'])).toBe('run.kernels["a b"]');
  });
});

/**
 * Walk `data` along `node` of the schema, recording every definition a value passes through.
 * Enough of JSON Schema for this schema: $ref, properties, items, additionalProperties, oneOf.
 */
function visit(
  node: Json,
  data: unknown,
  defs: Record<string, Json>,
  seen: Set<string>
): void {
  if (data === undefined) {
    return;
  }
  if (typeof node.$ref === 'string') {
    const name = node.$ref.replace('#/definitions/', '');
    seen.add(name);
    visit(defs[name], data, defs, seen);
    return;
  }
  if (Array.isArray(node.oneOf)) {
    for (const branch of node.oneOf as Json[]) {
      if (branch.type === 'null' ? data === null : data !== null) {
        visit(branch, data, defs, seen);
      }
    }
    return;
  }
  if (Array.isArray(data) && node.items) {
    for (const item of data) {
      visit(node.items as Json, item, defs, seen);
    }
    return;
  }
  if (data && typeof data === 'object') {
    for (const [key, value] of Object.entries(data)) {
      const sub =
        (node.properties as Record<string, Json> | undefined)?.[key] ??
        node.additionalProperties;
      if (sub && typeof sub === 'object') {
        visit(sub as Json, value, defs, seen);
      }
    }
  }
}
