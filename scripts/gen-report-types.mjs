// Generates the TypeScript side of the report contract from the one schema:
//  - src/report/generated/report.ts: types (json-schema-to-typescript)
//  - src/report/generated/validate.ts: a precompiled ajv validator, so the browser never
//    needs `new Function` (works under a Content-Security-Policy without 'unsafe-eval').
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

const banner = '/* Generated from python_pkg/gpusight/schema/report.schema.json by scripts/gen-report-types.mjs. Do not edit. */\n';

const types = await compile(schema, 'GpusightReport', {
  bannerComment: banner,
  additionalProperties: false,
  unreachableDefinitions: true,
  style: { singleQuote: true }
});
writeFileSync(join(outDir, 'report.ts'), types);

const ajv = new Ajv({ allErrors: true, code: { source: true, esm: true }, strict: false });
const validate = ajv.compile(schema);
const code = standaloneCode.default ? standaloneCode.default(ajv, validate) : standaloneCode(ajv, validate);
writeFileSync(
  join(outDir, 'validate.ts'),
  banner + '/* eslint-disable */\n// @ts-nocheck\n' + code + '\n'
);

const meta = {
  schemaVersion: schema.properties.schema_version.pattern,
  findingIds: schema.definitions.FindingId.enum,
  bottlenecks: schema.definitions.Bottleneck.enum
};
writeFileSync(
  join(outDir, 'catalogue.ts'),
  banner +
    `export const FINDING_IDS = ${JSON.stringify(meta.findingIds, null, 2)} as const;\n` +
    `export const BOTTLENECKS = ${JSON.stringify(meta.bottlenecks, null, 2)} as const;\n`
);
console.log('report types, validator and catalogue generated in src/report/generated');
