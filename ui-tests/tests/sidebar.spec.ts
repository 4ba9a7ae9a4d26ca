import {
  expect,
  test,
  type IJupyterLabPageFixture,
  type JupyterLabPage
} from '@jupyterlab/galata';

/**
 * The GPU sidebar in a real JupyterLab with real kernels: it follows the active notebook's or
 * console's kernel, keeps receiving monitor samples while a cell keeps the kernel busy,
 * reconnects after a restart, says how to install gpusight in a kernel that lacks it (the
 * "gpusight-nogs" kernel from setup-nogs-kernel.sh), and renders check and benchmark reports
 * with the report's lit elements.
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
  // Export is a browser download.
  test.use({ acceptDownloads: true });
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
  // Playwright reads fixtures from the first parameter's destructuring: it must be a pattern.
  // eslint-disable-next-line no-empty-pattern
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

  test('follows a console and its kernel, then the notebook again', async ({
    page,
    tmpPath
  }) => {
    await newNotebook(page, tmpPath, 'beside-console.ipynb');
    const panel = await openSidebar(page);
    await expect(panel).toHaveAttribute('data-state', 'ready', READY);
    await expect(panel).toHaveAttribute(
      'data-session-path',
      /beside-console\.ipynb$/
    );
    const notebookKernel = await panel.getAttribute('data-kernel-id');
    expect(notebookKernel).toBeTruthy();
    await samplesAbove(panel, 0);

    // A console on python3 by name: no kernel dialog (which would offer "gpusight-nogs" too).
    await page.evaluate(async basePath => {
      await window.jupyterapp.commands.execute('console:create', {
        basePath,
        kernelPreference: { name: 'python3' },
        activate: true
      });
    }, tmpPath);
    // The console's label and, once its kernel has started, the kernel's id: from the console
    // widget itself (the shell's current widget right after console:create).
    const consoleWidget = () =>
      page.evaluate(() => {
        const widget = window.jupyterapp.shell.currentWidget as unknown as {
          node: HTMLElement;
          title: { label: string };
          sessionContext?: {
            path: string;
            session?: { kernel?: { id: string } | null } | null;
          };
        } | null;
        return {
          isConsole: !!widget?.node.classList.contains('jp-ConsolePanel'),
          label: widget?.title.label ?? '',
          path: widget?.sessionContext?.path ?? '',
          kernel: widget?.sessionContext?.session?.kernel?.id ?? null
        };
      });
    await expect
      .poll(async () => (await consoleWidget()).kernel, READY)
      .toBeTruthy();
    const {
      isConsole,
      label: consoleLabel,
      path: consolePath,
      kernel
    } = await consoleWidget();
    expect(isConsole).toBe(true);
    expect(consolePath.startsWith(`${tmpPath}/console-`)).toBe(true);
    const consoleKernel = kernel!;
    expect(consoleKernel).not.toBe(notebookKernel);

    const consoleFollowed = async () => {
      await expect(panel).toHaveAttribute('data-kernel-id', consoleKernel);
      await expect(panel).toHaveAttribute('data-session-path', consolePath);
      await expect(panel).toHaveAttribute('data-kernel-name', 'python3');
      await expect(panel.locator('.jp-GpusightSidebar-doc')).toHaveText(
        consoleLabel
      );
      await expect(panel).toHaveAttribute('data-state', 'ready', READY);
      await expect(panel).toHaveAttribute('data-monitor', 'on');
    };
    const notebookFollowed = async () => {
      await expect(panel).toHaveAttribute('data-kernel-id', notebookKernel!);
      await expect(panel).toHaveAttribute(
        'data-session-path',
        /beside-console\.ipynb$/
      );
      await expect(panel.locator('.jp-GpusightSidebar-doc')).toHaveText(
        'beside-console.ipynb'
      );
      await expect(panel).toHaveAttribute('data-state', 'ready');
      await expect(panel).toHaveAttribute('data-monitor', 'on');
    };

    // The new console is the active widget: the panel shows its kernel, with a history of its
    // own that fills from that kernel.
    await consoleFollowed();
    const consoleSamples = await samplesAbove(panel, 2);
    // The import ran silently: nothing of gpusight's shows in the console.
    await expect(page.locator('.jp-CodeConsole-content .jp-Cell')).toHaveCount(
      0
    );

    // Back to the notebook by its tab: its kernel, its history, growing again.
    await page.activity.activateTab('beside-console.ipynb');
    await notebookFollowed();
    await samplesAbove(panel, (await samples(panel)) + 2);

    // The console by its tab: its kernel again, its history kept and growing.
    await page.activity.activateTab(consoleLabel);
    await consoleFollowed();
    expect(await samples(panel)).toBeGreaterThanOrEqual(consoleSamples);
    await samplesAbove(panel, (await samples(panel)) + 2);

    await page.activity.activateTab('beside-console.ipynb');
    await notebookFollowed();
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
  test('benchmarks the hardware: the CPU row measured, the GPU rows skipped without CUDA', async ({
    page,
    tmpPath
  }) => {
    await newNotebook(page, tmpPath, 'bench.ipynb');
    const panel = await openSidebar(page);
    await expect(panel).toHaveAttribute('data-state', 'ready', READY);
    await samplesAbove(panel, 2);
    const bench = panel.locator('.jp-GpusightSidebar-bench');
    // The button runs the suite within the settings' budget (10 s by default); without CUDA the
    // GPU stages return at once and the CPU matmul gets at most 2 s of it.
    await expect(bench).toHaveAttribute('title', /about 10 s/);
    await bench.click();
    // Running (the CPU matmul alone takes up to 2 s): no second job can start meanwhile.
    await expect(bench).toBeDisabled();
    await expect(panel).toHaveAttribute('data-reports', '1', {
      timeout: 60_000
    });
    await expect(panel.locator('.jp-GpusightSidebar-notice')).toHaveCount(0);
    const report = panel.locator('gs-report');
    await expect(report.locator('gs-error')).toHaveCount(0);
    await expect(report.locator('.jp-GpusightReport-header h2')).toHaveText(
      'gpusight: Hardware benchmarks'
    );
    await expect(bench).toBeEnabled();

    // The chart: the CPU row, labelled with its value; no bar, as it has no ceiling to read it
    // against.
    const rows = report.locator('gs-benchmarks .jp-GpusightCeilingsChart-row');
    const cpu = report.locator(
      'gs-benchmarks .jp-GpusightCeilingsChart-row[data-id="cpu.matmul.fp32"]'
    );
    await expect(cpu).toHaveCount(1);
    await expect(rows).toHaveCount(1);
    // The row's tooltip has the whole label (the narrow panel may cut or wrap the text).
    const cpuLabel = (await cpu.locator('title').textContent()) ?? '';
    expect(cpuLabel).toMatch(
      /^CPU matmul fp32: [\d,.]+ GFLOP\/s \(no reference\)$/
    );
    const gflops = Number(
      /([\d,.]+) GFLOP/.exec(cpuLabel)![1].replace(/,/g, '')
    );
    expect(gflops).toBeGreaterThan(0);
    await expect(
      report.locator('gs-benchmarks .jp-GpusightCeilingsChart-bar')
    ).toHaveCount(0);

    // Every GPU benchmark was skipped on this CPU-only torch: one line under "Not run, and why",
    // not a row each, and not again in the notes.
    const notRun = report.locator('details.jp-GpusightReport-notRun');
    await expect(notRun.locator('summary')).toHaveText(
      /^Not run, and why \(\d+\)$/
    );
    await expect(notRun.locator('li')).toHaveCount(1);
    await expect(notRun.locator('li')).toContainText('no CUDA device');
    await expect(report.locator('.jp-GpusightReport-notes')).toHaveCount(0);

    // The verdict names the CPU-only build first, then the CPU's number; never "No bottleneck".
    await expect(report.locator('.jp-GpusightVerdict-bottleneck')).toHaveText(
      'CPU-only torch build'
    );
    await expect(report.locator('.jp-GpusightVerdict-summary')).toHaveText(
      /^torch \S+ is a CPU-only build, so this ran without a GPU\. GPU benchmarks skipped: no CUDA device.*; CPU fp32 matmul [\d,]+ GFLOP\/s$/
    );
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

    // One Export in the panel: the report's own Export HTML (a download, its file name).
    await expect(
      panel.locator('gs-report button.jp-GpusightReport-export')
    ).toHaveCount(0);
    const exportButton = panel.locator('.jp-GpusightSidebar-export');
    await expect(exportButton).toBeEnabled();
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      exportButton.click()
    ]);
    const name = download.suggestedFilename();
    expect(name).toMatch(
      /^gpusight-watch-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.html$/
    );
    await expect(panel.locator('.jp-GpusightSidebar-notice')).toHaveText(
      `Exported ${name}`
    );
  });

  test('is open after a reload, with its reports', async ({
    page,
    tmpPath
  }) => {
    await newNotebook(page, tmpPath, 'reload.ipynb');
    const panel = await openSidebar(page);
    await expect(panel).toHaveAttribute('data-state', 'ready', READY);
    await panel.locator('.jp-GpusightSidebar-check').click();
    await expect(panel).toHaveAttribute('data-reports', '1', {
      timeout: 60_000
    });

    // Galata's own readiness wait expects a Launcher tab; the restored layout has the notebook.
    // The fixture is Galata's JupyterLabPage, whose reload takes waitForIsReady; the fixture's
    // type keeps Playwright's reload signature, so tsc needs the class's.
    const lab = page as unknown as JupyterLabPage;
    await lab.reload({ waitForIsReady: false });
    await page.locator('#jupyterlab-splash').waitFor({ state: 'detached' });
    // No command this time: the layout restorer opened it.
    const restored = page.locator('#gpusight-sidebar');
    await expect(restored).toBeVisible({ timeout: 30_000 });
    await expect(restored).toHaveAttribute('data-state', 'ready', READY);
    // The kernel's hello lists its reports again, and the newest is drawn.
    await expect(restored).toHaveAttribute('data-reports', '1', {
      timeout: 30_000
    });
    await expect(restored.locator('gs-report gs-checklist')).toBeAttached({
      timeout: 30_000
    });
  });
});
