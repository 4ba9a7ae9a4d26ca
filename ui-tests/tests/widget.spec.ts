import { expect, test } from '@jupyterlab/galata';
import * as path from 'node:path';

/**
 * The report widget in a real notebook: a recorded report shown with
 * `gpusight.jupyter.widget.show(load_report(...))` draws every chart, Copy puts the fix on the
 * clipboard, and "Insert cell below" adds the fix as a new (unrun) cell under the output's cell.
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
const SHOW_REPORT = `from gpusight import load_report
from gpusight.jupyter.widget import show
report = load_report(${JSON.stringify(FIXTURE)})
step, busy, dt = 0.0842, 0.0318, 0.005
report["run"]["timeline"] = [
    {"t": round(i * dt, 4), "gpu": 0, "util_pct": 100 if (i * dt) % step < busy else 0, "cpu_pct": 97.0}
    for i in range(20_000)
]
report["run"]["step_starts_s"] = [round(i * step, 4) for i in range(int(20_000 * dt / step))]
show(report)`;

const PIN_MEMORY_FIX =
  'loader = DataLoader(dataset, batch_size=64, num_workers=8, pin_memory=True)';

test.use({
  permissions: ['clipboard-read', 'clipboard-write'],
  viewport: { width: 1280, height: 2000 }
});

test.describe('report widget', () => {
  test.beforeEach(async ({ page }) => {
    await page.notebook.createNew('widget.ipynb');
    await page.notebook.setCell(0, 'code', SHOW_REPORT);
    await page.notebook.addCell('code', '# the next cell');
    await page.notebook.run();
    await expect(
      page.locator('gs-report .jp-GpusightVerdict-bottleneck')
    ).toHaveText('Host-device copies', { timeout: 60_000 });
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

    // Benchmarks: a ceiling marker per measured benchmark, the skipped one says why.
    await expect(
      report.locator('line.jp-GpusightCeilingsChart-ceiling')
    ).toHaveCount(3);
    await expect(
      report.locator('rect.jp-GpusightCeilingsChart-bar')
    ).toHaveCount(3);
    await expect(
      report.locator('g.jp-GpusightCeilingsChart-row.jp-mod-skipped text')
    ).toHaveText(
      'Kernel launch (eager): skipped: budget of 10 s spent before this benchmark'
    );

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
    await expect(report.locator('li.jp-GpusightFindings-item')).toHaveCount(3);
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

  test('looks right in the light and dark themes', async ({ page }) => {
    // One snapshot per part: the whole report is taller than the notebook shows at once.
    const parts = [
      'gs-verdict',
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
