// Times <gs-report> rendering a report with a 50,000-sample timeline in Debian's Chromium, and
// records the result in benchmarks/results/browser-render.json. Target: under 200 ms.
//   node benchmarks/browser/build.mjs && node benchmarks/browser/render.mjs
// Uses playwright-core from ui-tests/node_modules (no browser download: CHROMIUM or /usr/bin/chromium).
import { createRequire } from 'node:module';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { report50k } from './report-50k.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const require = createRequire(join(root, 'ui-tests', 'package.json'));
const { chromium } = require('playwright-core');

const SAMPLES = Number(process.env.SAMPLES ?? 50_000);
const RUNS = Number(process.env.RUNS ?? 15);
const WARMUP = 3;
const TARGET_MS = 200;
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';

const browser = await chromium.launch({
  executablePath,
  args: ['--no-sandbox']
});
const version = browser.version();
const results = {};
try {
  for (const theme of ['light', 'dark']) {
    const page = await browser.newPage({
      viewport: { width: 960, height: 1400 }
    });
    const errors = [];
    page.on('pageerror', e => errors.push(String(e)));
    page.on('console', m => m.type() === 'error' && errors.push(m.text()));
    const file = theme === 'light' ? 'page.html' : 'page-dark.html';
    await page.goto(pathToFileURL(join(here, 'dist', file)).href);
    const report = report50k(SAMPLES);
    await page.evaluate(r => {
      window.__report = r;
    }, report);
    const timings = [];
    for (let i = 0; i < WARMUP + RUNS; i++) {
      const t = await page.evaluate(() =>
        window.gpusightBench.renderOnce(
          window.__report,
          document.getElementById('host')
        )
      );
      timings.push(t);
    }
    // Zoom: the redraw a user waits for on every wheel step or button press.
    const zoomMs = await page.evaluate(() => {
      const find = node => {
        for (const e of node.querySelectorAll('*')) {
          if (e.tagName === 'GS-TIMELINE') return e;
          const inner = e.shadowRoot && find(e.shadowRoot);
          if (inner) return inner;
        }
        return null;
      };
      const tl = find(document);
      const out = [];
      for (let i = 0; i < 10; i++) {
        const t0 = performance.now();
        tl.controller.zoomBy(i % 2 ? 0.5 : 2);
        out.push(performance.now() - t0);
      }
      return out.sort((a, b) => a - b)[5];
    });
    await page.screenshot({
      path: join(here, 'dist', `render-${theme}.png`),
      fullPage: true
    });
    await page.close();
    if (errors.length) {
      throw new Error(`page errors: ${errors.join('\n')}`);
    }
    const timed = timings.slice(WARMUP);
    const render = timed.map(t => t.renderMs).sort((a, b) => a - b);
    const validate = timed.map(t => t.validateMs).sort((a, b) => a - b);
    const q = (xs, p) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))];
    results[theme] = {
      first_render_ms: +timings[0].renderMs.toFixed(1),
      median_render_ms: +q(render, 0.5).toFixed(1),
      p90_render_ms: +q(render, 0.9).toFixed(1),
      min_render_ms: +render[0].toFixed(1),
      median_validate_ms: +q(validate, 0.5).toFixed(1),
      median_zoom_redraw_ms: +zoomMs.toFixed(2),
      samples: timed[0].samples,
      timeline_points_drawn: timed[0].timelinePoints,
      runs: RUNS
    };
    console.log(theme, results[theme]);
  }
} finally {
  await browser.close();
}

const out = {
  what: `<gs-report> rendering a full report whose timeline holds ${SAMPLES} NVML samples: from setting the report (schema validation included) to the charts drawn and laid out at the next animation frame; after ${WARMUP} warm-up renders`,
  command:
    'node benchmarks/browser/build.mjs && node benchmarks/browser/render.mjs',
  browser: `Chromium ${version} (headless, ${executablePath})`,
  viewport: '960x1400',
  machine: `${cpus().length} CPU cores (${cpus()[0]?.model ?? 'unknown'}), no GPU`,
  // Other work on the machine inflates the times: the 1-minute load average when it finished.
  load_average_1m: +loadavg()[0].toFixed(2),
  target_ms: TARGET_MS,
  meets_target: Object.values(results).every(
    r => r.median_render_ms < TARGET_MS
  ),
  recorded_at: new Date().toISOString(),
  results
};
mkdirSync(join(root, 'benchmarks', 'results'), { recursive: true });
writeFileSync(
  join(root, 'benchmarks', 'results', 'browser-render.json'),
  JSON.stringify(out, null, 2) + '\n'
);
console.log(
  `median ${Object.entries(results)
    .map(([k, r]) => `${k} ${r.median_render_ms} ms`)
    .join(', ')} (target < ${TARGET_MS} ms)`
);
