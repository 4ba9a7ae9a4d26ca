// Notebook 7 smoke test: gpusight installed from the wheel next to `notebook` (no JupyterLab UI)
// draws a saved report output, and its sidebar opens and connects to the notebook's kernel.
// Starts `jupyter notebook` from the given environment on a free port, opens a notebook whose
// one output is a gpusight report (the UI tests' full fixture), and checks in Chromium that the
// report renders with its verdict and findings; then opens the sidebar with its command (as the
// palette would) and waits for it to greet the kernel (gpusight's version, the Python) and offer
// its check; and that no page error came from the extension.
//   node ui-tests/notebook7-smoke.mjs /path/to/venv/bin/jupyter   (make test-wheel runs it)
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const FIXTURE = path.join(
  HERE,
  '..',
  'src',
  'report',
  'fixtures',
  'full-report.json'
);
const MIME = 'application/vnd.gpusight.report+json';

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function waitFor(url, ms) {
  const until = Date.now() + ms;
  for (;;) {
    try {
      const res = await fetch(url);
      if (res.ok) {
        return;
      }
    } catch {
      // not up yet
    }
    if (Date.now() > until) {
      throw new Error(`${url} did not answer within ${ms / 1000} s`);
    }
    await new Promise(r => setTimeout(r, 500));
  }
}

async function main() {
  const jupyter = process.argv[2];
  if (!jupyter) {
    throw new Error(
      'usage: node notebook7-smoke.mjs /path/to/venv/bin/jupyter'
    );
  }
  const report = JSON.parse(fs.readFileSync(FIXTURE, 'utf-8'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpusight-nb7-'));
  const nb = {
    cells: [
      {
        cell_type: 'code',
        execution_count: 1,
        id: 'report',
        metadata: {},
        source: ['%%gpusight --steps 20\n', 'train()'],
        outputs: [
          {
            output_type: 'execute_result',
            execution_count: 1,
            metadata: {},
            data: { [MIME]: report, 'text/plain': ['<gpusight report>'] }
          }
        ]
      }
    ],
    metadata: {
      kernelspec: {
        name: 'python3',
        display_name: 'Python 3',
        language: 'python'
      }
    },
    nbformat: 4,
    nbformat_minor: 5
  };
  fs.writeFileSync(path.join(dir, 'report.ipynb'), JSON.stringify(nb));
  const port = await freePort();
  const server = spawn(
    jupyter,
    [
      'notebook',
      '--no-browser',
      '--allow-root',
      `--port=${port}`,
      '--ServerApp.token=',
      '--ServerApp.password=',
      '--ServerApp.disable_check_xsrf=True',
      // window.jupyterapp, to run the sidebar's command as the palette would
      '--JupyterNotebookApp.expose_app_in_browser=True',
      `--ServerApp.root_dir=${dir}`
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] }
  );
  let log = '';
  server.stdout.on('data', d => (log += d));
  server.stderr.on('data', d => (log += d));
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu']
  });
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitFor(`${base}/api/status`, 120_000);
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', e => errors.push(String(e)));
    await page.goto(`${base}/notebooks/report.ipynb`);
    const el = page.locator('gs-report');
    await el.first().waitFor({ state: 'visible', timeout: 120_000 });
    // Playwright's locators look inside the report's (open) shadow roots.
    const title = report.findings[0].title;
    await el.first().getByText(title).first().waitFor({ timeout: 30_000 });
    const verdict = report.verdict.bottleneck;
    // The sidebar: Notebook 7 has no ILabShell; the panel goes in its left area and follows
    // the notebook through the tracker.
    await page.waitForFunction(
      () => window.jupyterapp?.commands.hasCommand('gpusight:open-sidebar'),
      null,
      { timeout: 60_000 }
    );
    await page.evaluate(() =>
      window.jupyterapp.commands.execute('gpusight:open-sidebar')
    );
    const side = page.locator('#gpusight-sidebar');
    await side.waitFor({ state: 'visible', timeout: 30_000 });
    const hello = side.locator('.jp-GpusightSidebar-connected');
    await hello.waitFor({ timeout: 120_000 });
    await side
      .locator('.jp-GpusightSidebar-check')
      .waitFor({ state: 'visible', timeout: 30_000 });
    const greeting = (await hello.textContent()).replace(/\s+/g, ' ').trim();
    const ours = errors.filter(e => /gpusight|gs-/i.test(e));
    if (ours.length) {
      throw new Error(`page errors from gpusight: ${ours.join('; ')}`);
    }
    console.log(
      `Notebook 7: the report renders (bottleneck ${verdict}, "${title}"); ` +
        `the sidebar connects ("${greeting}")`
    );
  } catch (err) {
    console.error(log.slice(-3000));
    throw err;
  } finally {
    await browser.close();
    server.kill('SIGTERM');
    // The server's pipes keep node alive until it has gone: wait a little, then make sure.
    await new Promise(r => setTimeout(r, 3000));
    if (server.exitCode === null) {
      server.kill('SIGKILL');
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  err => {
    console.error(`notebook7-smoke: ${err.message}`);
    process.exit(1);
  }
);
