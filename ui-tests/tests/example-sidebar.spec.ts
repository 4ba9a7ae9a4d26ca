import { expect, test, type IJupyterLabPageFixture } from '@jupyterlab/galata';
import * as path from 'node:path';

/**
 * A newcomer's first hour: the example notebook run top to bottom in its real kernel (the
 * check, the watch, the watch again, the what-if, `gpusight.diagnose`), with no error in any
 * cell; then the GPU sidebar opened on that kernel connects and lists every report the
 * notebook showed, each with its kind and cell (a kernel that had shown a diagnose report used to
 * answer a hello the panel rejected: "Connecting to the kernel…" forever).
 */

const EXAMPLE = path.resolve(
  __dirname,
  '..',
  '..',
  'examples',
  'why-is-my-gpu-idle.ipynb'
);

test.use({ viewport: { width: 1280, height: 1200 } });

async function errorOutputs(page: IJupyterLabPageFixture): Promise<string[]> {
  return page
    .locator(
      '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
    )
    .filter({ hasText: /Error|Traceback/ })
    .allInnerTexts();
}

test('the example notebook run top to bottom, then the sidebar lists its reports', async ({
  page,
  tmpPath
}) => {
  test.setTimeout(600_000);
  await page.contents.uploadFile(EXAMPLE, `${tmpPath}/example.ipynb`);
  await page.notebook.openByPath(`${tmpPath}/example.ipynb`);
  await page.notebook.activate('example.ipynb');

  await page.notebook.runCellByCell();
  expect(await errorOutputs(page)).toEqual([]);
  // %gpusight, the two watches, the what-if and diagnose each drew a report.
  const drawn = page.locator('.jp-OutputArea-output gs-report');
  await expect(drawn).toHaveCount(5, { timeout: 60_000 });

  await page.evaluate(() =>
    window.jupyterapp.commands.execute('gpusight:open-sidebar')
  );
  const panel = page.locator('#gpusight-sidebar');
  await expect(panel).toBeVisible();
  await expect(panel).toHaveAttribute('data-state', 'ready', {
    timeout: 90_000
  });
  await expect(panel).toHaveAttribute('data-reports', '5', {
    timeout: 30_000
  });
  // The newest (diagnose's) is drawn; the list names each one.
  await expect(panel.locator('gs-report article')).toBeVisible({
    timeout: 30_000
  });
  await expect(panel.locator('gs-report gs-error')).toHaveCount(0);
  const entries = panel.locator('.jp-GpusightSidebar-entry');
  await expect(entries).toHaveCount(5);
  const kinds = await entries
    .locator('.jp-GpusightSidebar-entryKind')
    .allInnerTexts();
  expect(kinds.every(k => k.trim().length > 0)).toBe(true);
  // Each names the cell that made it (the list used to read "watch", "watch", "watch").
  expect(kinds.every(k => /, cell \[\d+\]$/.test(k.trim()))).toBe(true);
  expect(new Set(kinds.map(k => k.trim())).size).toBe(5);
});
