import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

/**
 * An exported notebook page with several reports (`Report._repr_html_` outputs), read over HTTP
 * a piece at a time as a network delivers it: the first output's loader unpacks the bundle while
 * later outputs are still arriving. Each report must be drawn from its whole data, in every one
 * of 20 loads (it used to show "not valid JSON ... damaged" for a valid report in 7 of 12).
 * No JupyterLab needed.
 */

const ROOT = path.resolve(__dirname, '..', '..');
const PYTHON =
  process.env.GPUSIGHT_PYTHON ?? path.join(ROOT, '.venv', 'bin', 'python');
const OUTPUTS = 4;
const LOADS = 20;
const CHUNK = 16 * 1024;
const CHUNK_DELAY_MS = 4;

const PAGE_SCRIPT = `
import sys
sys.path.insert(0, ${JSON.stringify(path.join(ROOT, 'python_pkg', 'tests'))})
from gpusight.html_export import notebook_html
from html_support import fixed_report, typical_report
reports = [typical_report(), fixed_report()] * ${OUTPUTS / 2}
body = "".join(f"<div class='output'>{notebook_html(r)}</div>" for r in reports)
open(sys.argv[1], "w", encoding="utf-8").write(
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>outputs</title>'
    f"</head><body>{body}</body></html>"
)
`;

let server: Server;
let url = '';

test.beforeAll(async () => {
  test.setTimeout(120_000);
  const dir = mkdtempSync(path.join(tmpdir(), 'gpusight-several-'));
  const file = path.join(dir, 'several.html');
  execFileSync(PYTHON, ['-c', PAGE_SCRIPT, file], {
    cwd: ROOT,
    stdio: 'pipe',
    timeout: 120_000
  });
  const page = readFileSync(file);
  server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    let at = 0;
    const next = (): void => {
      if (at >= page.length) {
        res.end();
        return;
      }
      res.write(page.subarray(at, at + CHUNK));
      at += CHUNK;
      setTimeout(next, CHUNK_DELAY_MS);
    };
    next();
  });
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/several.html`;
});

test.afterAll(async () => {
  await new Promise(resolve => server.close(resolve));
});

test(`a page of ${OUTPUTS} reports read in pieces draws each one, ${LOADS} loads of ${LOADS}`, async ({
  browser
}) => {
  test.setTimeout(300_000);
  const context = await browser.newContext({
    viewport: { width: 1200, height: 1600 }
  });
  let drawn = 0;
  const failures: string[] = [];
  for (let load = 0; load < LOADS; load++) {
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', e => errors.push(e.message));
    await page.goto(url, { waitUntil: 'load' });
    // Every output's data is taken (drawn, or shown as an error) ...
    await expect(
      page.locator('script[data-gpusight][data-gpusight-mounted]')
    ).toHaveCount(OUTPUTS);
    // ... and each as the report it is.
    const verdicts = await page
      .locator('gs-report .jp-GpusightVerdict-bottleneck')
      .allTextContents();
    const broken = await page.locator('gs-error').count();
    const expected = [
      'Host-device copies',
      'Compute (the GPU is busy)',
      'Host-device copies',
      'Compute (the GPU is busy)'
    ];
    if (
      broken === 0 &&
      errors.length === 0 &&
      JSON.stringify(verdicts) === JSON.stringify(expected)
    ) {
      drawn++;
    } else {
      failures.push(
        `load ${load}: ${broken} gs-error, verdicts ${JSON.stringify(verdicts)} ${errors.join('; ')}`
      );
    }
    await page.close();
  }
  console.log(
    `several reports: every report drawn in ${drawn} of ${LOADS} loads`
  );
  expect(failures).toEqual([]);
  expect(drawn).toBe(LOADS);
  await context.close();
});
