import { expect, test } from '@jupyterlab/galata';
import type { Locator } from '@playwright/test';
import * as path from 'node:path';
import {
  brokenWords,
  openDetails,
  overflowing,
  sidewaysScrollers,
  wholeShot
} from './layout-checks';

/**
 * Every kind of report fits a notebook at 1,400 px and the sidebar at 250 px: no element past its
 * card, no scroller around the report that scrolls sideways, no word broken over two lines. The
 * reports are real ones: recorded on GPUs (the environment check, the hardware benchmarks,
 * `diagnose` with its what-if, `diagnose_inference`, a two-rank DDP run merged), a watched script
 * that raised, and this machine's own environment check, made live. A screenshot of each, as
 * drawn in both places, is attached to the test's results for a person to look at.
 */

const ROOT = path.resolve(__dirname, '..', '..');
const RECORDED = [
  'benchmarks/results/h200-check.json',
  'benchmarks/results/h200-bench-run7/b-final/bench.json',
  'benchmarks/results/h200-whatif-run9/whatif-slow_loader.json',
  'benchmarks/results/h200x2-multi-run4/multi-inference.json',
  'benchmarks/results/h200x2-multi-run4/multi-ddp.json',
  'src/report/fixtures/raised-report.json'
].map(p => path.join(ROOT, p));

// One cell shows every report; a displayed report is listed in the kernel's reports too, so the
// sidebar lists them all. No indented block: the editor indents by itself.
const SHOW_ALL = `import gpusight
from gpusight import load_report
from gpusight.report_parse import report_from_dict
from IPython.display import display
_ = [display(report_from_dict(load_report(p))) for p in ${JSON.stringify(RECORDED)}]
display(gpusight.check())`;

const KINDS = RECORDED.length + 1;

/**
 * One drawn report looked at: drawn without error, then every problem the layout checks find,
 * under ``where`` in ``problems``, and its whole screenshot saved as ``shot``.
 */
async function lookAt(
  report: Locator,
  where: string,
  shot: string,
  problems: Record<string, string[]>
): Promise<void> {
  await expect(report.locator('article')).toBeVisible({ timeout: 30_000 });
  await expect(report.locator('gs-error')).toHaveCount(0);
  await report.evaluate(el => el.scrollIntoView({ block: 'start' }));
  const title = `${where}: ${await titleOf(report)}`;
  await openDetails(report);
  const found = [
    ...(await overflowing(report)),
    ...(await sidewaysScrollers(report)),
    ...(await brokenWords(report))
  ];
  if (found.length) {
    problems[title] = found;
  }
  await wholeShot(report, shot);
}

async function titleOf(report: Locator): Promise<string> {
  return (
    await report.locator('.jp-GpusightReport-header h2').innerText()
  ).trim();
}

test('each kind of report fits a notebook at 1,400 px and the sidebar at 250 px, with no word broken', async ({
  page
}, testInfo) => {
  test.setTimeout(300_000);
  await page.setViewportSize({ width: 1400, height: 1000 });
  await page.notebook.createNew('kinds.ipynb', { kernel: 'python3' });
  await page.notebook.setCell(0, 'code', SHOW_ALL);
  await page.notebook.run();
  const drawn = page.locator('.jp-OutputArea-output gs-report');
  await expect(drawn).toHaveCount(KINDS, { timeout: 90_000 });

  const problems: Record<string, string[]> = {};
  for (let i = 0; i < KINDS; i++) {
    const shot = testInfo.outputPath(`notebook-1400-${i}.png`);
    await lookAt(drawn.nth(i), `1400 px, ${i}`, shot, problems);
  }

  await page.evaluate(() =>
    window.jupyterapp.commands.execute('gpusight:open-sidebar')
  );
  const panel = page.locator('#gpusight-sidebar');
  await expect(panel).toHaveAttribute('data-state', 'ready', {
    timeout: 60_000
  });
  await expect(panel).toHaveAttribute('data-reports', String(KINDS), {
    timeout: 30_000
  });
  const width = await panel.evaluate(el => el.getBoundingClientRect().width);
  expect(Math.abs(width - 250)).toBeLessThanOrEqual(10);
  await panel.locator('.jp-GpusightSidebar-pause').click();
  const entries = panel.locator('.jp-GpusightSidebar-entry');
  await expect(entries).toHaveCount(KINDS);
  const report = panel.locator('gs-report');
  for (let i = 0; i < KINDS; i++) {
    await entries.nth(i).click();
    await expect(entries.nth(i)).toHaveAttribute('aria-current', 'true');
    const shot = testInfo.outputPath(`sidebar-250-${i}.png`);
    await lookAt(report, `250 px, ${i}`, shot, problems);
  }
  expect(problems).toEqual({});
});
