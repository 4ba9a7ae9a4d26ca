import { expect, test, type IJupyterLabPageFixture } from '@jupyterlab/galata';

/**
 * The GPU sidebar in a real JupyterLab with real kernels: it follows the active notebook's
 * kernel, keeps receiving monitor samples while a cell keeps the kernel busy, reconnects after
 * a restart, says how to install gpusight in a kernel that lacks it (the "gpusight-nogs" kernel
 * from setup-nogs-kernel.sh), and renders a check report with the report's lit elements.
 *
 * The panel's node carries what it shows as data attributes (data-state, data-session-path,
 * data-kernel-id, data-samples, data-connects), so these tests read numbers rather than pixels.
 */

const READY = { timeout: 90_000 };

/**
 * A notebook with one code cell, for the given kernel, opened from its file: no kernel dialog
 * (which would offer "gpusight-nogs" too), so each test knows which kernel it gets.
 */
async function newNotebook(
  page: IJupyterLabPageFixture,
  tmpPath: string,
  name: string,
  source = '',
  kernel = 'python3'
) {
  const notebook = {
    cells: [
      {
        cell_type: 'code',
        source,
        metadata: {},
        outputs: [],
        execution_count: null
      }
    ],
    metadata: {
      kernelspec: { name: kernel, display_name: kernel, language: 'python' }
    },
    nbformat: 4,
    nbformat_minor: 5
  };
  await page.contents.uploadContent(
    JSON.stringify(notebook),
    'text',
    `${tmpPath}/${name}`
  );
  expect(await page.notebook.openByPath(`${tmpPath}/${name}`)).toBe(true);
  await page.notebook.activate(name);
}

async function openSidebar(page: IJupyterLabPageFixture) {
  await page.evaluate(() =>
    window.jupyterapp.commands.execute('gpusight:open-sidebar')
  );
  const panel = page.locator('#gpusight-sidebar');
  await expect(panel).toBeVisible();
  return panel;
}

async function samples(panel: ReturnType<IJupyterLabPageFixture['locator']>) {
  return Number(await panel.getAttribute('data-samples'));
}

/** Waits until the panel has received more than `than` samples. */
async function samplesAbove(
  panel: ReturnType<IJupyterLabPageFixture['locator']>,
  than: number,
  timeout = 30_000
) {
  await expect.poll(() => samples(panel), { timeout }).toBeGreaterThan(than);
  return samples(panel);
}

test.describe('GPU sidebar', () => {
  // The bridge logs its state changes (console.debug): printed when a test fails.
  let logs: string[] = [];
  test.beforeEach(({ page }) => {
    logs = [];
    page.on('console', m => {
      if (/gpusight/i.test(m.text())) {
        logs.push(`${m.type()}: ${m.text()}`);
      }
    });
  });
  test.afterEach(({}, testInfo) => {
    if (testInfo.status !== testInfo.expectedStatus) {
      console.log(
        `gpusight console in "${testInfo.title}":\n${logs.join('\n')}`
      );
    }
  });

  test('follows the active notebook and its kernel', async ({
    page,
    tmpPath
  }) => {
    await newNotebook(page, tmpPath, 'first.ipynb');
    await newNotebook(page, tmpPath, 'second.ipynb');
    const panel = await openSidebar(page);

    await expect(panel).toHaveAttribute('data-session-path', /second\.ipynb$/);
    await expect(panel).toHaveAttribute('data-state', 'ready', READY);
    await expect(panel.locator('.jp-GpusightSidebar-doc')).toHaveText(
      'second.ipynb'
    );
    await expect(panel.locator('.jp-GpusightSidebar-kernel')).toContainText(
      'Python'
    );
    const secondKernel = await panel.getAttribute('data-kernel-id');
    const secondSamples = await samplesAbove(panel, 0);

    await page.activity.activateTab('first.ipynb');
    await expect(panel).toHaveAttribute('data-session-path', /first\.ipynb$/);
    await expect(panel.locator('.jp-GpusightSidebar-doc')).toHaveText(
      'first.ipynb'
    );
    await expect(panel).toHaveAttribute('data-state', 'ready', READY);
    const firstKernel = await panel.getAttribute('data-kernel-id');
    expect(firstKernel).toBeTruthy();
    expect(firstKernel).not.toBe(secondKernel);
    await samplesAbove(panel, 0);

    // Back to the second notebook: its history is still there and grows again.
    await page.activity.activateTab('second.ipynb');
    await expect(panel).toHaveAttribute('data-kernel-id', secondKernel!);
    expect(await samples(panel)).toBeGreaterThanOrEqual(secondSamples);
    await samplesAbove(panel, (await samples(panel)) + 2);
  });

  test('keeps sampling while a cell keeps the kernel busy for 10 s', async ({
    page,
    tmpPath
  }) => {
    await newNotebook(
      page,
      tmpPath,
      'busy.ipynb',
      'import time\nfor _ in range(100):\n    time.sleep(0.1)'
    );
    const panel = await openSidebar(page);
    await expect(panel).toHaveAttribute('data-state', 'ready', READY);
    await samplesAbove(panel, 0);

    // Start the cell without waiting for it to finish.
    await page.evaluate(() => {
      void window.jupyterapp.commands.execute('notebook:run-cell');
    });
    const prompt = page.locator('.jp-Cell .jp-InputArea-prompt').first();
    await expect(prompt).toHaveText('[*]:', { timeout: 10_000 });
    const atStart = await samples(panel);
    const began = Date.now();
    await page.waitForTimeout(6_000);
    const later = await samples(panel);
    const seconds = (Date.now() - began) / 1000;
    // Still running: these samples arrived while the kernel was busy.
    await expect(prompt).toHaveText('[*]:');
    // 5 Hz by default: ~30 samples in 6 s; at least half must have come through.
    expect(later - atStart).toBeGreaterThanOrEqual(
      Math.floor(seconds * 5 * 0.5)
    );
    // The running cell is shaded on the chart, and closed once it ends.
    const running = panel.locator(
      'gs-live-monitor .jp-GpusightLiveChart-cell.jp-mod-running'
    );
    await expect(running.first()).toBeAttached();
    await expect(prompt).toHaveText('[1]:', { timeout: 30_000 });
    await expect(running).toHaveCount(0);
    await expect(
      panel.locator('gs-live-monitor .jp-GpusightLiveChart-cell').first()
    ).toBeAttached();
  });

  test('reconnects after the kernel restarts', async ({ page, tmpPath }) => {
    await newNotebook(page, tmpPath, 'restart.ipynb');
    const panel = await openSidebar(page);
    await expect(panel).toHaveAttribute('data-state', 'ready', READY);
    await expect(panel).toHaveAttribute('data-connects', '1');
    const kernel = await panel.getAttribute('data-kernel-id');
    await samplesAbove(panel, 0);

    await page.evaluate(() => {
      void window.jupyterapp.commands.execute('notebook:restart-kernel');
    });
    await page.locator('.jp-Dialog .jp-mod-accept').click();

    await expect(panel).toHaveAttribute('data-connects', '2', READY);
    await expect(panel).toHaveAttribute('data-state', 'ready');
    await expect(panel).toHaveAttribute('data-kernel-id', kernel!); // same kernel, new process
    const after = await samples(panel);
    await samplesAbove(panel, after + 2);
  });

  test('says how to install gpusight into a kernel without it', async ({
    page,
    tmpPath
  }) => {
    // The kernelspec comes from ui-tests/setup-nogs-kernel.sh (run by `make test-ui`).
    await newNotebook(page, tmpPath, 'nogs.ipynb', '', 'gpusight-nogs');
    const panel = await openSidebar(page);
    await expect(panel).toHaveAttribute('data-state', 'missing', READY);
    const box = panel.locator('.jp-GpusightSidebar-missing');
    await expect(box).toContainText(
      "gpusight is not installed in this kernel's environment"
    );
    await expect(box.locator('.jp-GpusightSidebar-install')).toHaveText(
      /\/\.nogs\/venv\/bin\/python3? -m pip install gpusight$/
    );
    await expect(panel.locator('gs-live-monitor')).toHaveCount(0);
  });

  test('applies a new sampling rate from the settings live', async ({
    page,
    tmpPath
  }) => {
    await newNotebook(page, tmpPath, 'rate.ipynb');
    const panel = await openSidebar(page);
    await expect(panel).toHaveAttribute('data-state', 'ready', READY);
    const live = panel.locator('.jp-GpusightSidebar-live');
    await expect(live).toContainText('5 Hz', { timeout: 30_000 });
    // Galata keeps settings in the page (mockSettings): nothing reaches the user's files.
    await page.evaluate(async () => {
      const registry = await window.galata.getPlugin(
        '@jupyterlab/apputils-extension:settings'
      );
      await registry!.set('gpusight:plugin', 'sampleRateHz', 10);
    });
    // The kernel confirms the new rate, and the samples come about twice as fast.
    await expect(live).toContainText('10 Hz', { timeout: 30_000 });
    const before = await samples(panel);
    await page.waitForTimeout(4_000);
    expect((await samples(panel)) - before).toBeGreaterThanOrEqual(25);
  });

  test('checks the environment and shows the report in the panel', async ({
    page,
    tmpPath
  }) => {
    await newNotebook(page, tmpPath, 'check.ipynb');
    const panel = await openSidebar(page);
    await expect(panel).toHaveAttribute('data-state', 'ready', READY);
    await samplesAbove(panel, 2);
    await panel.locator('.jp-GpusightSidebar-check').click();
    const report = panel.locator('gs-report');
    await expect(report.locator('gs-checklist')).toBeAttached({
      timeout: 60_000
    });
    await expect(report.locator('gs-error')).toHaveCount(0);
    await expect(panel).toHaveAttribute('data-reports', '1');
    // A second report: the newest shows, both are listed, and the first can be shown again.
    await panel.locator('.jp-GpusightSidebar-check').click();
    await expect(panel).toHaveAttribute('data-reports', '2', {
      timeout: 60_000
    });
    const entries = panel.locator('.jp-GpusightSidebar-entry');
    await expect(entries).toHaveCount(2);
    await expect(entries.first()).toHaveAttribute('aria-current', 'true');
    await entries.last().click();
    await expect(entries.last()).toHaveAttribute('aria-current', 'true');
    await expect(report.locator('gs-checklist')).toBeAttached();
  });
  test('watches the next cell, then exports its report', async ({
    page,
    tmpPath
  }) => {
    await newNotebook(
      page,
      tmpPath,
      'watch.ipynb',
      'total = 0\nfor i in range(100_000):\n    total += i\ntotal'
    );
    const panel = await openSidebar(page);
    await expect(panel).toHaveAttribute('data-state', 'ready', READY);
    await samplesAbove(panel, 2);
    const watch = panel.locator('.jp-GpusightSidebar-watch');
    await watch.click();
    await expect(panel).toHaveAttribute('data-armed', 'true', {
      timeout: 30_000
    });
    await expect(watch).toHaveAttribute('aria-pressed', 'true');

    // The user runs the cell as usual; it runs under %%gpusight and its report comes to the panel.
    await page.notebook.runCell(0);
    await expect(panel).toHaveAttribute('data-reports', '1', {
      timeout: 60_000
    });
    await expect(panel).toHaveAttribute('data-armed', 'false');
    await expect(panel.locator('gs-report')).toContainText('Training run');
    // Once only: the next run of the cell is not watched.
    await page.notebook.runCell(0);
    await page.waitForTimeout(2_000);
    await expect(panel).toHaveAttribute('data-reports', '1');

    const exportButton = panel.locator('.jp-GpusightSidebar-export');
    await expect(exportButton).toBeEnabled();
    await exportButton.click();
    const notice = panel.locator('.jp-GpusightSidebar-notice');
    const saved = /Saved (gpusight-watch-\d{8}-\d{6}\.html)/;
    await expect(notice).toHaveText(saved, { timeout: 60_000 });
    const name = saved.exec((await notice.textContent()) ?? '')![1];
    expect(await page.contents.fileExists(`${tmpPath}/${name}`)).toBe(true);
  });
});
