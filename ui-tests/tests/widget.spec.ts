import { expect, test } from '@jupyterlab/galata';
import * as path from 'node:path';

/**
 * The report in a real notebook: a recorded report shown as a cell's last expression draws
 * through gpusight's MIME renderer (`application/vnd.gpusight.report+json`, not a widget and not
 * the HTML fallback beside it) with every chart, Copy puts the fix on the clipboard, "Insert cell
 * below" adds the fix as a new (unrun) cell under the output's cell, and the saved notebook shows
 * the report again after a reload, without a kernel.
 */

const FIXTURE = path.resolve(
  __dirname,
  '..',
  '..',
  'src',
  'report',
  'fixtures',
  'full-report.json'
);

// The recorded report, with its 3-sample timeline stretched to 20,000 samples of a GPU starved by
// its input pipeline (busy 31.8 ms of every 84.2 ms step), so the timeline has real work to do.
// It is the cell's result as a Report, displayed through Report._repr_mimebundle_ like any other;
// the subclass only hands out the recorded dict (the dataclasses are not rebuilt from JSON). No
// indented block: the editor is typed into, and it indents by itself.
const SHOW_REPORT = `from gpusight import load_report
from gpusight.report import Report
report = load_report(${JSON.stringify(FIXTURE)})
step, busy, dt = 0.0842, 0.0318, 0.005
report["run"]["timeline"] = [
    {"t": round(i * dt, 4), "gpu": 0, "util_pct": 100 if (i * dt) % step < busy else 0, "cpu_pct": 97.0}
    for i in range(20_000)
]
report["run"]["step_starts_s"] = [round(i * step, 4) for i in range(int(20_000 * dt / step))]
Recorded = type("Recorded", (Report,), {"to_dict": lambda self: report})
DataLoader = dataset = None  # the names the first fix reads: bound, so it may be inserted
Recorded(kind=report["kind"], machine=report["machine"])`;

const REPORT_MIME_TYPE = 'application/vnd.gpusight.report+json';

const PIN_MEMORY_FIX =
  'loader = DataLoader(dataset, batch_size=64, num_workers=8, pin_memory=True)';

test.use({
  permissions: ['clipboard-read', 'clipboard-write'],
  viewport: { width: 1280, height: 2000 }
});

test.describe('report output', () => {
  test.beforeEach(async ({ page }) => {
    // The kernel with gpusight (the test server also has one without: sidebar.spec.ts).
    await page.notebook.createNew('widget.ipynb', { kernel: 'python3' });
    await page.notebook.setCell(0, 'code', SHOW_REPORT);
    await page.notebook.addCell('code', '# the next cell');
    await page.notebook.run();
    await expect(
      page.locator('gs-report .jp-GpusightVerdict-bottleneck')
    ).toHaveText('Host-device copies', { timeout: 60_000 });
  });

  test('is drawn by the MIME renderer, once', async ({ page }) => {
    const output = page.locator('.jp-OutputArea-output');
    await expect(output).toHaveCount(1);
    await expect(output).toHaveAttribute('data-mime-type', REPORT_MIME_TYPE);
    await expect(output).toHaveClass(/\bjp-GpusightRenderedReport\b/);
    await expect(output.locator(':scope > gs-report')).toHaveCount(1);
    // Neither a widget nor the HTML fallback that travels beside it for nbconvert.
    await expect(page.locator('.jp-GpusightWidget')).toHaveCount(0);
    await expect(page.locator('[data-gpusight-fallback]')).toHaveCount(0);
    expect(
      await page.evaluate(() =>
        window.jupyterapp.isPluginActivated('gpusight:mime')
      )
    ).toBe(true);
  });

  test('draws every chart from the report', async ({ page }) => {
    const report = page.locator('gs-report');
    await expect(report.locator('gs-error')).toHaveCount(0);

    // Step-time breakdown: one segment per non-zero category, labelled in ms and %.
    await expect(
      report.locator('rect.jp-GpusightBreakdownChart-rect')
    ).toHaveCount(6);
    await expect(
      report.locator('text.jp-GpusightBreakdownChart-label').nth(2)
    ).toHaveText('Host-device copies: 26.4 ms (31.4%)');

    // Timeline: 20,000 samples decimated to at most 4 points per pixel column.
    const line = report.locator(
      'path.jp-GpusightTimelineChart-line[data-series="gpu0"]'
    );
    await expect(line).toHaveCount(1);
    const points = Number(await line.getAttribute('data-points'));
    const plotWidth = await report
      .locator('rect.jp-GpusightTimelineChart-surface')
      .evaluate(el => Number(el.getAttribute('width')));
    expect(points).toBeGreaterThan(plotWidth);
    expect(points).toBeLessThanOrEqual(plotWidth * 4 + 2);
    // 1,187 steps are too dense to draw at full view...
    const hint = report.locator('text.jp-GpusightTimelineChart-hint');
    await expect(hint).toHaveText('1187 steps: zoom in to see boundaries');
    const steps = report.locator('path.jp-GpusightTimelineChart-steps');
    expect(await steps.getAttribute('d')).toBe('');
    // ...and appear once zoomed in (keyboard-reachable buttons).
    const zoomIn = report.getByRole('button', { name: 'Zoom in' });
    for (let i = 0; i < 4; i++) {
      await zoomIn.click();
    }
    await expect(hint).toHaveText('');
    const boundaries =
      ((await steps.getAttribute('d')) ?? '').match(/M/g)?.length ?? 0;
    expect(boundaries).toBeGreaterThan(10);
    expect(boundaries).toBeLessThan(1187 / 8);
    await expect(report.locator('.jp-GpusightTimeline-window')).not.toHaveText(
      '0 s – 100 s'
    );
    await report.getByRole('button', { name: 'Reset' }).click();
    await expect(hint).toHaveText('1187 steps: zoom in to see boundaries');

    // Benchmarks: a ceiling marker per measured benchmark; the skipped one says why under
    // "Not run, and why", not as an empty row.
    await expect(
      report.locator('line.jp-GpusightCeilingsChart-ceiling')
    ).toHaveCount(3);
    await expect(
      report.locator('rect.jp-GpusightCeilingsChart-bar')
    ).toHaveCount(3);
    await expect(
      report.locator('g.jp-GpusightCeilingsChart-row.jp-mod-skipped')
    ).toHaveCount(0);
    await expect(
      report.locator('details.jp-GpusightReport-notRun')
    ).toContainText('budget of 10 s spent before this benchmark');

    // What-ifs: one measured speedup with its noise whisker, one skipped sweep.
    await expect(
      report.locator('rect.jp-GpusightSpeedupsChart-bar')
    ).toHaveCount(1);
    await expect(
      report.locator('path.jp-GpusightSpeedupsChart-whisker')
    ).toHaveCount(1);
    await expect(
      report.locator('text.jp-GpusightSpeedupsChart-label').first()
    ).toHaveText(
      'DataLoader(pin_memory=True): 1.41× (±1.8% noise): 84.2 ms → 59.7 ms per step'
    );

    // Sweeps: two copy-size curves and the batch-size sweep, with its OOM marked.
    await expect(report.locator('svg.jp-GpusightSweepChart')).toHaveCount(3);
    await expect(report.locator('g.jp-GpusightSweepChart-failed')).toHaveCount(
      2
    );

    // Checklist and findings.
    await expect(report.locator('tr.jp-GpusightChecklist-row')).toHaveCount(5);
    // The largest measured finding is the "Do this first" card; the other two are listed.
    await expect(report.locator('gs-first-fix')).toHaveAttribute(
      'class',
      /jp-GpusightFirstFix/
    );
    await expect(
      report.locator('.jp-GpusightFirstFix[data-id="code.pageable_copy"]')
    ).toHaveCount(1);
    await expect(report.locator('li.jp-GpusightFindings-item')).toHaveCount(2);
    await expect(
      report.locator('.jp-GpusightFindings-source').first()
    ).toContainText('train.py:42');
  });

  test('Copy puts the fix on the clipboard', async ({ page }) => {
    const card = page.locator('gs-report gs-fix-card').first();
    await card.getByRole('button', { name: 'Copy the fix code' }).click();
    await expect(card.locator('.jp-GpusightFixCard-status')).toHaveText(
      'Copied'
    );
    const clipboard = await page.evaluate(() => navigator.clipboard.readText());
    expect(clipboard).toBe(PIN_MEMORY_FIX);
  });

  test('Insert cell below adds the fix under the cell that showed it, unrun', async ({
    page
  }) => {
    expect(await page.notebook.getCellCount()).toBe(2);
    const card = page.locator('gs-report gs-fix-card').first();
    await card.getByRole('button', { name: /Insert the fix code/ }).click();
    await expect(card.locator('.jp-GpusightFixCard-status')).toHaveText(
      'Inserted below (not run)'
    );
    expect(await page.notebook.getCellCount()).toBe(3);
    expect(await page.notebook.getCellType(1)).toBe('code');
    expect(await page.notebook.getCellTextInput(1)).toBe(PIN_MEMORY_FIX);
    // Never run: no execution count, no output.
    const cell = await page.evaluate(() => {
      const panel = window.jupyterapp.shell.currentWidget as unknown as {
        content: {
          model: {
            cells: { get(i: number): { toJSON(): Record<string, unknown> } };
          };
        };
      };
      return panel.content.model.cells.get(1).toJSON();
    });
    expect(cell.execution_count).toBeNull();
    expect(cell.outputs).toEqual([]);
    expect(await page.notebook.getCellTextInput(2)).toBe('# the next cell');
  });

  test('a saved notebook shows the report after a reload, with no kernel', async ({
    page,
    tmpPath
  }) => {
    expect(await page.notebook.save()).toBe(true);
    // What was saved: the report once as data and once as the HTML fallback, one line of text,
    // and nothing that needs a kernel or saved widget state.
    const response = await page.request.get(
      `/api/contents/${tmpPath}/widget.ipynb?content=1`
    );
    expect(response.ok()).toBe(true);
    const saved = (await response.json()) as {
      content: { cells: { outputs?: { data?: Record<string, unknown> }[] }[] };
    };
    const outputs = saved.content.cells[0].outputs ?? [];
    expect(outputs).toHaveLength(1);
    expect(Object.keys(outputs[0].data ?? {}).sort()).toEqual([
      REPORT_MIME_TYPE,
      'text/html',
      'text/plain'
    ]);

    // Saved above: nothing to revert (the default) or to ask about.
    expect(await page.notebook.close(false)).toBe(true);
    await page.kernel.shutdownAll();
    // A fresh page with a reset workspace: the layout must not bring the notebook back (with a
    // kernel) before it is opened below.
    await page.goto(`tree/${tmpPath}?reset`);
    await page.filebrowser.openDirectory(tmpPath);
    // open() says whether the tab is there at once; a 3 MB notebook can take longer to appear.
    await page.notebook.open('widget.ipynb', { noKernel: true });
    await expect(page.activity.getTabLocator('widget.ipynb')).toBeVisible();
    const report = page.locator('.jp-GpusightRenderedReport gs-report');
    await expect(report.locator('.jp-GpusightVerdict-bottleneck')).toHaveText(
      'Host-device copies',
      { timeout: 30_000 }
    );
    await expect(report.locator('gs-error')).toHaveCount(0);
    await expect(
      report.locator('rect.jp-GpusightBreakdownChart-rect')
    ).toHaveCount(6);
    await expect(
      report.locator('path.jp-GpusightTimelineChart-line[data-series="gpu0"]')
    ).toHaveCount(1);
    await expect(report.locator('li.jp-GpusightFindings-item')).toHaveCount(2);
    expect(await page.kernel.isAnyRunning()).toBe(false);
  });

  test('looks right in the light and dark themes', async ({ page }) => {
    // One snapshot per part: the whole report is taller than the notebook shows at once.
    const parts = [
      'gs-verdict',
      'gs-first-fix',
      'gs-findings',
      'gs-breakdown',
      'gs-timeline',
      'gs-whatifs',
      'gs-benchmarks',
      'gs-checklist'
    ];
    for (const theme of ['light', 'dark'] as const) {
      if (theme === 'light') {
        await page.theme.setLightTheme();
      } else {
        await page.theme.setDarkTheme();
      }
      for (const part of parts) {
        const el = page.locator(`gs-report ${part}`);
        await el.scrollIntoViewIfNeeded();
        await expect(el).toHaveScreenshot(`${part.slice(3)}-${theme}.png`, {
          maxDiffPixels: 50
        });
      }
    }
  });
});
