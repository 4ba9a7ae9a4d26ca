import { expect, test } from '@jupyterlab/galata';
import * as path from 'node:path';
import {
  brokenWords,
  openDetails,
  overflowing,
  sidewaysScrollers,
  themes
} from './layout-checks';

/**
 * The report fits any width: in the sidebar at its default 250 px and in a notebook at 1,400 px,
 * light and dark, no element of the report reaches past its card's box. After a page reload with
 * reports already in the kernel, the sidebar shows the newest within 5 s.
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

// The recorded report with what clutters a real one: a per-step series with a stall every 8th
// step, a what-if whose noise (±340 %) dwarfs its gain, GPU benchmarks skipped for one reason
// (and the note that repeats them), an inference sweep labelled with its unit, a DataLoader
// workers sweep. No indented block: the editor indents by itself.
const RICH_REPORT = `from gpusight import load_report
from gpusight.report import Report
report = load_report(${JSON.stringify(FIXTURE)})
report["run"]["step_times_ms"] = [210.0 if i % 8 == 5 else 84.0 + (i % 3) for i in range(64)]
report["what_if"].append({"change": "torch.inference_mode() around the forward", "before_ms": 61.2, "after_ms": 10.0, "speedup": 6.12, "noise_pct": 340.0})
report["what_if"].append({"change": "num_workers sweep", "finding_id": "load.input_bound", "before_ms": 84.2, "after_ms": 40.1, "speedup": 2.1, "noise_pct": 3.0, "series": [{"x": w, "y": 84.2 / min(w + 1, 2.1)} for w in range(5)]})
skipped = ["matmul.fp32", "matmul.tf32", "matmul.fp16", "copy.d2h.pinned", "copy.d2d", "launch.graph", "allreduce.nccl"]
report["benchmarks"] += [{"id": i, "label": i.replace(".", " "), "value": None, "unit": "GB/s", "skipped": "no CUDA device: torch.cuda.is_available() is False"} for i in skipped]
report["notes"].append(", ".join(skipped) + " skipped: no CUDA device: torch.cuda.is_available() is False")
report["benchmarks"].append({"id": "infer.throughput", "label": "Throughput (batch sweep)", "value": 7634.2, "unit": "samples/s", "series": [{"x": b, "y": 900.0 * b ** 0.5, "label": "samples/s"} for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)]})
Recorded = type("Recorded", (Report,), {"to_dict": lambda self: report})
rich = Recorded(kind=report["kind"], machine=report["machine"])`;

test.describe('report layout', () => {
  test('fits its cards in a notebook at 1,400 px, light and dark; the answer and the first fix above the fold', async ({
    page
  }) => {
    await page.setViewportSize({ width: 1400, height: 1000 });
    await page.notebook.createNew('layout.ipynb', { kernel: 'python3' });
    await page.notebook.setCell(0, 'code', `${RICH_REPORT}\nrich`);
    await page.notebook.run();
    const report = page.locator('.jp-OutputArea-output gs-report');
    await expect(report.locator('.jp-GpusightFirstFix-title')).toBeVisible({
      timeout: 60_000
    });
    await expect(report.locator('gs-error')).toHaveCount(0);
    // The noisy 6.12× is called what it is.
    await expect(
      report.locator('g.jp-GpusightSpeedupsChart-row.jp-mod-insignificant')
    ).toHaveCount(1);
    // The skipped work is one disclosure, and its note is not repeated.
    await expect(
      report.locator('details.jp-GpusightReport-notRun summary')
    ).toHaveText('Not run, and why (8)');
    await expect(report.locator('.jp-GpusightReport-notes li')).toHaveCount(1);
    // The stall every 8th step: 8 of 64 steps marked.
    await expect(
      report.locator('path.jp-GpusightStepsChart-bars.jp-mod-stalled')
    ).toHaveCount(1);
    await themes(page, async theme => {
      // The first screen: the report's top at the top of the notebook; the verdict and the
      // first fix (its code included) fit above the fold.
      await report.evaluate(el => el.scrollIntoView({ block: 'start' }));
      const fold = await page.evaluate(() => window.innerHeight);
      const fix = report.locator('gs-first-fix gs-fix-card');
      const box = await fix.boundingBox();
      expect(box).not.toBeNull();
      expect(box!.y + box!.height).toBeLessThanOrEqual(fold);
      await expect(page).toHaveScreenshot(`notebook-1400-${theme}.png`, {
        maxDiffPixels: 200
      });
      await openDetails(report);
      expect(await overflowing(report), theme).toEqual([]);
      expect(await sidewaysScrollers(report), theme).toEqual([]);
      expect(await brokenWords(report), theme).toEqual([]);
    });
  });

  test("shows the kernel's latest report within 5 s of connecting, and fits the sidebar at 250 px, light and dark", async ({
    page
  }, testInfo) => {
    await page.setViewportSize({ width: 1400, height: 1000 });
    await page.notebook.createNew('sidebar-layout.ipynb', {
      kernel: 'python3'
    });
    // The report goes into the kernel's list of reports, as a watched cell's would.
    await page.notebook.setCell(
      0,
      'code',
      `${RICH_REPORT}\nfrom gpusight.jupyter.comm import hub\nhub()._publish_report(None, "watch", rich)\nNone`
    );
    await page.notebook.run();
    await page.evaluate(() =>
      window.jupyterapp.commands.execute('gpusight:open-sidebar')
    );
    const panel = page.locator('#gpusight-sidebar');
    await expect(panel).toBeVisible();
    // As after a page reload: the panel connects to a kernel that already holds a report. Its
    // hello lists the report without its body; the panel fetches it and shows it within 5 s.
    await expect(panel).toHaveAttribute('data-state', 'ready', {
      timeout: 60_000
    });
    const report = panel.locator('gs-report');
    await expect(report.locator('.jp-GpusightFirstFix-title')).toBeVisible({
      timeout: 5_000
    });
    const width = await panel.evaluate(el => el.getBoundingClientRect().width);
    expect(Math.abs(width - 250)).toBeLessThanOrEqual(10);
    // The live monitor above the report keeps moving: paused, and masked in the snapshot.
    await panel.locator('.jp-GpusightSidebar-pause').click();
    await themes(page, async theme => {
      await report.evaluate(el => el.scrollIntoView({ block: 'start' }));
      await expect(panel).toHaveScreenshot(`sidebar-250-${theme}.png`, {
        mask: [panel.locator('.jp-GpusightSidebar-monitor')],
        // A clean-machine CI run once rasterised the bold runs of this narrow panel
        // differently (2,257 px, 1 %; the same tree passed on a rerun): 2 % lets glyphs vary,
        // while a wrap or a card out of place moves far more, and overflow is checked below.
        maxDiffPixelRatio: 0.02
      });
      await openDetails(report);
      // The whole report, for a person to look at (an attachment, not compared).
      await report.screenshot({
        path: testInfo.outputPath(`sidebar-report-${theme}.png`)
      });
      expect(await overflowing(report), theme).toEqual([]);
      expect(await sidewaysScrollers(report), theme).toEqual([]);
      expect(await brokenWords(report), theme).toEqual([]);
    });
  });
});
