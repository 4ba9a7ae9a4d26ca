import { expect, test, type IJupyterLabPageFixture } from '@jupyterlab/galata';
import * as path from 'node:path';

/**
 * Fixes that run, in the example notebook a new user opens first, with its real kernel: watch
 * the training cell, then for every fix card "Insert cell below" gives a cell that runs without
 * an error (it rebuilds `loader` with the notebook's own call, changed), and "Apply to that cell"
 * changes the line of the earlier cell that built the loader, and nothing else (one undo takes
 * it back; a cell edited since the watch is refused). Then the notebook's own loop: the changed
 * cell run, the watch again, and the two runs compared; and "Verify", which does that loop
 * in one click and shows the measured gain beside the predicted one.
 */

const EXAMPLE = path.resolve(
  __dirname,
  '..',
  '..',
  'examples',
  'why-is-my-gpu-idle.ipynb'
);

// The example's cells (markdown counted): %load_ext, the setup that builds `loader`, the watch,
// the watch after the fix, and the comparison of the two.
const LOAD_EXT = 1;
const SETUP = 5;
const WATCH = 6;
const REWATCH = 8;
const COMPARE = 9;

test.use({ viewport: { width: 1280, height: 1600 } });

/** The text the cell's outputs show (stderr and tracebacks included). */
async function outputText(
  page: IJupyterLabPageFixture,
  index: number
): Promise<string> {
  const cell = await page.notebook.getCellLocator(index);
  return (await cell?.locator('.jp-OutputArea').innerText()) ?? '';
}

async function errorsIn(
  page: IJupyterLabPageFixture,
  index: number
): Promise<number> {
  const cell = await page.notebook.getCellLocator(index);
  return (
    (await cell
      ?.locator('[data-mime-type="application/vnd.jupyter.stderr"]')
      .filter({ hasText: /Error|Traceback/ })
      .count()) ?? 0
  );
}

/** Sets a cell's text as a collaborator would (typing would auto-indent it). */
async function setSource(
  page: IJupyterLabPageFixture,
  index: number,
  text: string
): Promise<void> {
  await page.evaluate(
    ([i, t]) => {
      const panel = window.jupyterapp.shell.currentWidget as unknown as {
        content: {
          widgets: { model: { sharedModel: { setSource(s: string): void } } }[];
        };
      };
      panel.content.widgets[i].model.sharedModel.setSource(t);
    },
    [index, text] as const
  );
}

async function activeCell(page: IJupyterLabPageFixture) {
  return page.evaluate(() => {
    const panel = window.jupyterapp.shell.currentWidget as unknown as {
      content: {
        activeCellIndex: number;
        activeCell: {
          editor: {
            getSelection(): {
              start: { line: number };
              end: { line: number };
            };
          } | null;
        } | null;
      };
    };
    const editor = panel.content.activeCell?.editor;
    const sel = editor?.getSelection();
    return {
      index: panel.content.activeCellIndex,
      lines: sel ? [sel.start.line, sel.end.line] : null
    };
  });
}

test('the example notebook: every fix inserted runs, Apply changes the line that built the loader', async ({
  page,
  tmpPath
}) => {
  test.setTimeout(420_000);
  await page.contents.uploadFile(EXAMPLE, `${tmpPath}/example.ipynb`);
  await page.notebook.openByPath(`${tmpPath}/example.ipynb`);
  await page.notebook.activate('example.ipynb');

  const original = await page.notebook.getCellTextInput(SETUP);
  const loaderLine = original
    .split('\n')
    .findIndex(l => l.startsWith('loader = DataLoader('));
  expect(loaderLine).toBeGreaterThan(0);

  for (const index of [LOAD_EXT, SETUP, WATCH]) {
    await page.notebook.runCell(index);
    expect(await errorsIn(page, index)).toBe(0);
  }
  const watch = await page.notebook.getCellLocator(WATCH);
  const report = watch!.locator('gs-report');
  await expect(report.locator('.jp-GpusightVerdict-bottleneck')).toHaveText(
    'Input pipeline',
    { timeout: 120_000 }
  );

  // Every fix card's code, inserted below the watch and run in the kernel: no error.
  const cards = report.locator('gs-fix-card');
  const n = await cards.count();
  expect(n).toBeGreaterThan(0);
  let inserted = 0;
  for (let i = 0; i < n; i++) {
    const insert = cards
      .nth(i)
      .getByRole('button', { name: /Insert the fix code/ });
    if ((await insert.count()) === 0) {
      continue; // shell commands and prose are for copying
    }
    await insert.click();
    inserted++;
    const below = WATCH + 1;
    const code = await page.notebook.getCellTextInput(below);
    expect(code).not.toMatch(/\bdataset\b/); // the notebook never defines `dataset`
    await page.notebook.runCell(below);
    expect(await errorsIn(page, below), code).toBe(0);
  }
  // The input-pipeline fix (the loader waits ~80% of each step here) is insertable.
  expect(inserted).toBeGreaterThan(0);
  const rewatch = REWATCH + inserted;
  const compare = COMPARE + inserted;

  // The loader's card: a change to the setup cell, two cells above the watch.
  const card = report.locator('gs-fix-card').filter({
    has: page.getByRole('button', { name: /Apply the change to cell/ })
  });
  await expect(card).toHaveCount(1);
  const status = card.locator('.jp-GpusightFixCard-cellStatus');

  await card.getByRole('button', { name: /Show cell/ }).click();
  await expect(status).toHaveText(/^Shown: cell \[\d+\], line \d+$/);
  await expect
    .poll(() => activeCell(page))
    .toEqual({ index: SETUP, lines: [loaderLine, loaderLine] });

  await card.getByRole('button', { name: /Apply the change to cell/ }).click();
  await expect(status).toHaveText(/^Applied to cell \[\d+\] \(not run/);
  const applied = await page.notebook.getCellTextInput(SETUP);
  const before = original.split('\n');
  const after = applied.split('\n');
  expect(after).toHaveLength(before.length);
  const changed = after.flatMap((line, i) => (line === before[i] ? [] : [i]));
  expect(changed).toEqual([loaderLine]);
  expect(after[loaderLine]).toMatch(
    /^loader = DataLoader\(SlowDataset\(\), batch_size=32, shuffle=True, num_workers=[1-9]/
  );
  // Never run: the cell keeps the execution count of its earlier run.
  await expect(
    (await page.notebook.getCellLocator(SETUP))!.locator('.jp-InputPrompt')
  ).toHaveText('[2]:');

  // One undo in the cell's editor takes the change back.
  await page.notebook.enterCellEditingMode(SETUP);
  await page.keyboard.press('Control+z');
  await expect.poll(() => page.notebook.getCellTextInput(SETUP)).toBe(original);
  await page.keyboard.press('Escape');

  // A cell edited since the watch is not patched.
  await setSource(page, SETUP, `${original}\n# edited`);
  await card.getByRole('button', { name: /Apply the change to cell/ }).click();
  await expect(status).toHaveText(/^Not applied: cell \[\d+\] has changed/);
  expect(await page.notebook.getCellTextInput(SETUP)).toBe(
    `${original}\n# edited`
  );
  await setSource(page, SETUP, original);

  // The loop the notebook teaches: apply, run the changed cell, watch again, compare.
  await card.getByRole('button', { name: /Apply the change to cell/ }).click();
  await expect(status).toHaveText(/^Applied/);
  for (const index of [SETUP, rewatch, compare]) {
    await page.notebook.runCell(index);
    expect(await errorsIn(page, index)).toBe(0);
  }
  const again = (await page.notebook.getCellLocator(rewatch))!.locator(
    'gs-report'
  );
  await expect(again.locator('.jp-GpusightVerdict-bottleneck')).toBeVisible({
    timeout: 120_000
  });
  expect(await outputText(page, compare)).toContain(
    'gpusight diff: before -> after'
  );

  // Verify, after Apply: the changed cell run, then a copy of the watched cell below it that
  // watches again and compares with the report the fix came from, prediction beside.
  await card.getByRole('button', { name: /^Verify/ }).click();
  await expect(status).toHaveText(/^Verifying: the changed cell run/);
  const verifying = WATCH + 1;
  await expect
    .poll(() => outputText(page, verifying), { timeout: 180_000 })
    .toContain('measured / predicted');
  expect(await page.notebook.getCellTextInput(verifying)).toMatch(
    /^%%gpusight --steps 20 --compare-to \d+ --finding load\.input_bound\n/
  );
  const verified = await outputText(page, verifying);
  expect(verified).toMatch(/gpusight verify: cell \[\d+\] -> this cell/);
  expect(verified).toMatch(/predicted: [\d.]+x \(load\.input_bound/);
  expect(await errorsIn(page, verifying)).toBe(0);
});
