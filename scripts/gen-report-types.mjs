// Generates the TypeScript side of the report contract from the one schema:
//  - src/report/generated/report.ts: types (json-schema-to-typescript)
//  - src/report/generated/validate.ts: a precompiled ajv validator, so the browser never
//    needs `new Function` (works under a Content-Security-Policy without 'unsafe-eval').
//  - src/report/generated/catalogue.ts: finding ids, bottleneck categories and the breakdown's
//    keys (in the schema's order, which is the order the charts draw them)
//  - src/report/generated/version.ts: the schema version this build reads, taken from
//    python_pkg/gpusight/report_schema.py so that both readers accept the same reports.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compile } from 'json-schema-to-typescript';
import Ajv from 'ajv';
import standaloneCode from 'ajv/dist/standalone/index.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const schemaPath = join(root, 'python_pkg/gpusight/schema/report.schema.json');
const outDir = join(root, 'src/report/generated');
const schema = JSON.parse(readFileSync(schemaPath, 'utf-8'));
mkdirSync(outDir, { recursive: true });

const banner =
  '/* Generated from python_pkg/gpusight/schema/report.schema.json by scripts/gen-report-types.mjs. Do not edit. */\n';

const types = await compile(schema, 'GpusightReport', {
  bannerComment: banner,
  additionalProperties: false,
  unreachableDefinitions: true,
  style: { singleQuote: true }
});
writeFileSync(join(outDir, 'report.ts'), types);

const ajv = new Ajv({
  allErrors: true,
  code: { source: true, esm: true },
  strict: false
});
const validate = ajv.compile(schema);
const code = standaloneCode.default
  ? standaloneCode.default(ajv, validate)
  : standaloneCode(ajv, validate);
writeFileSync(
  join(outDir, 'validate.ts'),
  banner + '/* eslint-disable */\n// @ts-nocheck\n' + code + '\n'
);

const meta = {
  schemaVersion: schema.properties.schema_version.pattern,
  findingIds: schema.definitions.FindingId.enum,
  bottlenecks: schema.definitions.Bottleneck.enum,
  breakdownKeys: Object.keys(schema.definitions.Breakdown.properties)
};
writeFileSync(
  join(outDir, 'catalogue.ts'),
  banner +
    `export const FINDING_IDS = ${JSON.stringify(meta.findingIds, null, 2)} as const;\n` +
    `export const BOTTLENECKS = ${JSON.stringify(meta.bottlenecks, null, 2)} as const;\n` +
    `export const BREAKDOWN_KEYS = ${JSON.stringify(meta.breakdownKeys, null, 2)} as const;\n`
);
// The reader's version lives in Python (SCHEMA_MAJOR/SCHEMA_MINOR); the schema only pins the
// major in its schema_version pattern. Read both and refuse to generate if they disagree.
const pySource = readFileSync(
  join(root, 'python_pkg/gpusight/report_schema.py'),
  'utf-8'
);
const pyConst = name => {
  const m = pySource.match(new RegExp(`^${name}\\s*=\\s*(\\d+)\\s*$`, 'm'));
  if (!m)
    throw new Error(
      `${name} = <int> not found in python_pkg/gpusight/report_schema.py`
    );
  return Number(m[1]);
};
const schemaMajor = pyConst('SCHEMA_MAJOR');
const schemaMinor = pyConst('SCHEMA_MINOR');
const patternMajor = /^\^(\d+)\\\./.exec(meta.schemaVersion);
if (!patternMajor || Number(patternMajor[1]) !== schemaMajor) {
  throw new Error(
    `schema_version pattern ${meta.schemaVersion} does not pin SCHEMA_MAJOR=${schemaMajor} of report_schema.py`
  );
}
writeFileSync(
  join(outDir, 'version.ts'),
  banner +
    `/** The newest report schema this build reads: its major, and any minor up to its own. */\n` +
    `export const SCHEMA_MAJOR = ${schemaMajor};\n` +
    `export const SCHEMA_MINOR = ${schemaMinor};\n` +
    `export const SCHEMA_VERSION = '${schemaMajor}.${schemaMinor}';\n`
);
console.log(
  'report types, validator, catalogue and version generated in src/report/generated'
);
