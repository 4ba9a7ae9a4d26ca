import { test as labTest } from '@jupyterlab/galata';
import {
  expect,
  test,
  type Browser,
  type BrowserContext,
  type Page
} from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * Exported HTML reports in a plain Chromium page, no JupyterLab: files written by `gpusight html`
 * and `gpusight diff --html` draw every chart and finding with the network cut off, make no
 * request at all, break no Content-Security-Policy rule, and show hostile report strings as text.
 * Also: notebook outputs from `Report._repr_html_` (two on one page), nbconvert's HTML of an
 * executed notebook, and the Export button of the widget in a real JupyterLab.
 */

const ROOT = path.resolve(__dirname, '..', '..');
const VENV = path.join(ROOT, '.venv', 'bin');
const GPUSIGHT = path.join(VENV, 'gpusight');
const PYTHON = path.join(VENV, 'python');
const FIXTURE = path.join(
  ROOT,
  'src',
  'report',
  'fixtures',
  'full-report.json'
);
const EVIL = '</script><img src=x onerror=window.__pwned=1>';

/** Schema fields whose strings are enums or patterns: kept, so the hostile report stays valid. */
const KEEP = new Set([
  'schema_version',
  'kind',
  'severity',
  'status',
  'basis',
  'bottleneck',
  'language',
  'sha256'
]);
const FINDING_ID = /^(env|cfg|code|load|dist|infer|hw)\.[a-z0-9_]+$/;
/** Maps with free keys: their keys are made hostile too. */
const FREE_KEYS = new Set(['env', 'params', 'settings', 'kernels']);

/** Every string in the report (and every free key) replaced by EVIL plus a counter. */
function hostile(value: unknown, key = '', counter = { n: 0 }): unknown {
  if (Array.isArray(value)) {
    return value.map(v => hostile(v, key, counter));
  }
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [
        FREE_KEYS.has(key) ? `${EVIL}#${counter.n++}` : k,
        hostile(v, k, counter)
      ])
    );
  }
  if (typeof value === 'string' && !KEEP.has(key) && !FINDING_ID.test(value)) {
    return `${EVIL}#${counter.n++}`;
  }
  return value;
}

let dir = '';

function run(command: string, args: string[]): void {
  execFileSync(command, args, { cwd: ROOT, stdio: 'pipe', timeout: 180_000 });
}

test.beforeAll(() => {
  test.setTimeout(240_000);
  dir = mkdtempSync(path.join(tmpdir(), 'gpusight-html-'));
  run(GPUSIGHT, ['html', FIXTURE, '-o', path.join(dir, 'full.html')]);
  const evil = hostile(JSON.parse(readFileSync(FIXTURE, 'utf-8')));
  writeFileSync(path.join(dir, 'hostile.json'), JSON.stringify(evil));
  run(GPUSIGHT, [
    'html',
    path.join(dir, 'hostile.json'),
    '-o',
    path.join(dir, 'hostile.html')
  ]);
  run(PYTHON, [path.join(ROOT, 'ui-tests', 'html_export_pages.py'), dir]);
  run(GPUSIGHT, [
    'diff',
    path.join(dir, 'before.json'),
    path.join(dir, 'after.json'),
    '--html',
    path.join(dir, 'compare.html')
  ]);
});

interface Watched {
  page: Page;
  context: BrowserContext;
  /** Every request other than the page's own file, each aborted. */
  requests: string[];
  /** securitypolicyviolation events: directive and blocked URI. */
  violations: () => Promise<string[]>;
  errors: string[];
}

/** Open `file` offline, with every request but the file itself recorded and aborted. */
async function open(
  browser: Browser,
  file: string,
  colorScheme: 'light' | 'dark' = 'light'
): Promise<Watched> {
  const url = pathToFileURL(file).href;
  const context = await browser.newContext({
    colorScheme,
    viewport: { width: 1200, height: 1600 }
  });
  await context.setOffline(true);
  const requests: string[] = [];
  await context.route('**/*', route => {
    const u = route.request().url();
    if (u === url) {
      return route.continue();
    }
    requests.push(u);
    return route.abort();
  });
  const page = await context.newPage();
  page.on('request', r => {
    if (r.url() !== url && !requests.includes(r.url())) {
      requests.push(r.url());
    }
  });
  const errors: string[] = [];
  page.on('pageerror', e => errors.push(e.message));
  page.on('console', m => {
    if (m.type() === 'error') {
      errors.push(m.text());
    }
  });
  await page.addInitScript(() => {
    const w = window as unknown as { __csp: string[] };
    w.__csp = [];
    document.addEventListener('securitypolicyviolation', e =>
      w.__csp.push(`${e.violatedDirective} ${e.blockedURI}`)
    );
  });
  await page.goto(url);
  return {
    page,
    context,
    requests,
    errors,
    violations: () =>
      page.evaluate(() => (window as unknown as { __csp: string[] }).__csp)
  };
}

/** Each chart's kind and how many marks (rect, path, line, circle) it drew. */
async function charts(page: Page): Promise<[string, number][]> {
  return page.evaluate(() => {
    const out: [string, number][] = [];
    const visit = (root: Document | ShadowRoot): void => {
      for (const el of root.querySelectorAll('*')) {
        if (
          el instanceof SVGSVGElement &&
          el.classList.contains('jp-GpusightChart')
        ) {
          const kind =
            [...el.classList].find(c => c !== 'jp-GpusightChart') ?? '';
          out.push([
            kind,
            el.querySelectorAll('rect, path, line, circle').length
          ]);
        }
        if (el.shadowRoot) {
          visit(el.shadowRoot);
        }
      }
    };
    visit(document);
    return out;
  });
}

/** Elements with this tag anywhere, through shadow roots. */
async function countDeep(page: Page, tag: string): Promise<number> {
  return page.evaluate(t => {
    let n = 0;
    const visit = (root: Document | ShadowRoot): void => {
      n += root.querySelectorAll(t).length;
      for (const el of root.querySelectorAll('*')) {
        if (el.shadowRoot) {
          visit(el.shadowRoot);
        }
      }
    };
    visit(document);
    return n;
  }, tag);
}

const FULL_CHARTS = [
  'jp-GpusightBreakdownChart',
  'jp-GpusightTimelineChart',
  'jp-GpusightSpeedupsChart',
  'jp-GpusightCeilingsChart',
  'jp-GpusightSweepChart'
];

test.describe('exported report file', () => {
  test('draws every chart and finding offline, with no request and no CSP violation', async ({
    browser
  }) => {
    const w = await open(browser, path.join(dir, 'full.html'));
    const report = w.page.locator('gs-report');
    await expect(report.locator('.jp-GpusightVerdict-bottleneck')).toHaveText(
      'Host-device copies'
    );
    const fixture = JSON.parse(readFileSync(FIXTURE, 'utf-8')) as {
      findings: { title: string }[];
    };
    for (const f of fixture.findings) {
      await expect(report.getByText(f.title, { exact: true })).toBeVisible();
    }
    await expect(report.locator('gs-error')).toHaveCount(0);
    // No Export button inside the exported file: it already is the file.
    await expect(report.locator('button.jp-GpusightReport-export')).toHaveCount(
      0
    );

    await expect
      .poll(async () => (await charts(w.page)).length)
      .toBeGreaterThanOrEqual(7);
    const drawn = await charts(w.page);
    for (const kind of FULL_CHARTS) {
      expect(drawn.filter(([k]) => k === kind).length, kind).toBeGreaterThan(0);
    }
    for (const [kind, marks] of drawn) {
      expect(marks, `${kind} has SVG content`).toBeGreaterThan(0);
    }
    expect(drawn.filter(([k]) => k === 'jp-GpusightSweepChart')).toHaveLength(
      3
    );

    expect(w.requests).toEqual([]);
    expect(await w.violations()).toEqual([]);
    expect(w.errors).toEqual([]);
    await w.context.close();
  });

  test('light by default, dark where the reader asks for it', async ({
    browser
  }) => {
    for (const [scheme, background] of [
      ['light', 'rgb(255, 255, 255)'],
      ['dark', 'rgb(17, 17, 17)']
    ] as const) {
      const w = await open(browser, path.join(dir, 'full.html'), scheme);
      await expect(w.page.locator('gs-report gs-verdict')).toBeVisible();
      expect(
        await w.page.evaluate(
          () => getComputedStyle(document.body).backgroundColor
        )
      ).toBe(background);
      await w.context.close();
    }
  });

  test('hostile strings in every field render as text', async ({ browser }) => {
    const w = await open(browser, path.join(dir, 'hostile.html'));
    const report = w.page.locator('gs-report');
    await expect(report.locator('gs-verdict')).toBeVisible();
    await expect(report.locator('gs-error')).toHaveCount(0);
    // The title, the verdict, a finding: each shows the markup as characters.
    await expect(w.page).toHaveTitle(
      new RegExp(`^${EVIL.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`)
    );
    await expect(report.locator('header h2')).toContainText(EVIL);
    await expect(report.locator('.jp-GpusightVerdict-summary')).toContainText(
      EVIL
    );
    await expect(
      report.locator('gs-findings').getByText(EVIL).first()
    ).toBeVisible();
    await expect
      .poll(async () => (await charts(w.page)).length)
      .toBeGreaterThan(0);
    await w.page.waitForTimeout(500);

    expect(await countDeep(w.page, 'img')).toBe(0);
    expect(
      await w.page.evaluate(() => 'pwned' in window || '__pwned' in window)
    ).toBe(false);
    expect(w.requests).toEqual([]);
    expect(await w.violations()).toEqual([]);
    expect(w.errors).toEqual([]);
    await w.context.close();
  });

  test('the comparison page shows both runs and what changed', async ({
    browser
  }) => {
    const w = await open(browser, path.join(dir, 'compare.html'));
    const compare = w.page.locator('gs-compare');
    await expect(compare.locator('.jp-GpusightCompare-headline')).toContainText(
      '2.00× faster'
    );
    await expect(compare.locator('gs-verdict')).toHaveCount(2);
    const status = (key: string) =>
      compare.locator(`tr[data-finding="${key}"] .jp-GpusightCompare-status`);
    await expect(status('code.pageable_copy@0')).toHaveText('Resolved');
    await expect(status('load.amp_unused')).toHaveText('New');
    await expect(status('cfg.tf32_disabled')).toHaveText('Still there');
    await expect
      .poll(
        async () =>
          (await charts(w.page)).filter(
            ([k, n]) => k === 'jp-GpusightBreakdownChart' && n > 0
          ).length
      )
      .toBe(2);
    expect(w.requests).toEqual([]);
    expect(await w.violations()).toEqual([]);
    expect(w.errors).toEqual([]);
    await w.context.close();
  });
});

test.describe('notebook fallback (Report._repr_html_)', () => {
  test('two outputs on one page: unpacked once, both drawn, offline', async ({
    browser
  }) => {
    const w = await open(browser, path.join(dir, 'outputs.html'));
    await expect(w.page.locator('gs-report')).toHaveCount(2);
    await expect(
      w.page.locator('gs-report .jp-GpusightVerdict-bottleneck')
    ).toHaveText(['Host-device copies', 'Compute (the GPU is busy)']);
    // The text fallback gives way to the report.
    await expect(
      w.page.locator('[data-gpusight-fallback]').first()
    ).toBeHidden();
    await expect
      .poll(async () => (await charts(w.page)).filter(([, n]) => n > 0).length)
      .toBeGreaterThanOrEqual(4);
    // The page had no JupyterLab theme: the default one is there, once.
    expect(await w.page.locator('style[data-gpusight-theme]').count()).toBe(1);
    expect(w.requests).toEqual([]);
    expect(w.errors).toEqual([]);
    await w.context.close();
  });

  test("nbconvert's HTML of an executed notebook draws the report offline", async ({
    browser
  }) => {
    const w = await open(browser, path.join(dir, 'nbconvert.html'));
    const report = w.page.locator('gs-report');
    await expect(report.locator('.jp-GpusightVerdict-bottleneck')).toHaveText(
      'Host-device copies'
    );
    await expect(report.locator('gs-error')).toHaveCount(0);
    await expect
      .poll(async () => (await charts(w.page)).filter(([, n]) => n > 0).length)
      .toBeGreaterThanOrEqual(4);
    // nbconvert's own template asks the CDN for require.js and MathJax (blocked here); our
    // output asks for nothing.
    expect(
      w.requests.filter(u => !/cdnjs|cdn\.jsdelivr|unpkg|mathjax/i.test(u))
    ).toEqual([]);
    expect(w.errors.filter(e => /gpusight|gs-/i.test(e))).toEqual([]);
    await w.context.close();
  });
});

labTest.describe('Export HTML in JupyterLab', () => {
  labTest.use({
    acceptDownloads: true,
    viewport: { width: 1280, height: 1600 }
  });

  labTest(
    'downloads the same file as gpusight html, which opens offline',
    async ({ page, browser }) => {
      await page.notebook.createNew('export.ipynb', { kernel: 'python3' });
      await page.notebook.setCell(
        0,
        'code',
        `from gpusight import load_report\nfrom gpusight.jupyter.widget import show\nshow(load_report(${JSON.stringify(FIXTURE)}))`
      );
      await page.notebook.run();
      const button = page.locator('gs-report button.jp-GpusightReport-export');
      await expect(button).toBeVisible({ timeout: 60_000 });
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        button.click()
      ]);
      expect(download.suggestedFilename()).toBe(
        'gpusight-diagnose-2026-03-02T10-21-37.html'
      );
      const saved = path.join(dir, 'downloaded.html');
      await download.saveAs(saved);

      // The same document as the CLI's, up to the JSON's number formatting.
      const split = (text: string) => {
        const m =
          /^([\s\S]*data-gpusight="report">)([^<]*)(<\/script>[\s\S]*)$/.exec(
            text
          );
        expect(m).not.toBeNull();
        return { head: m![1], data: JSON.parse(m![2]) as unknown, tail: m![3] };
      };
      const fromBrowser = split(readFileSync(saved, 'utf-8'));
      const fromCli = split(readFileSync(path.join(dir, 'full.html'), 'utf-8'));
      expect(fromBrowser.head).toBe(fromCli.head);
      expect(fromBrowser.tail).toBe(fromCli.tail);
      expect(fromBrowser.data).toEqual(fromCli.data);

      const w = await open(browser, saved);
      await expect(
        w.page.locator('gs-report .jp-GpusightVerdict-bottleneck')
      ).toHaveText('Host-device copies');
      await expect
        .poll(async () => (await charts(w.page)).length)
        .toBeGreaterThanOrEqual(7);
      expect(w.requests).toEqual([]);
      expect(await w.violations()).toEqual([]);
      await w.context.close();
    }
  );
});
