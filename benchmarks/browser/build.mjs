// Builds benchmarks/browser/dist/page.html: one standalone page with the report elements bundled
// inline (vite, IIFE) and JupyterLab's light theme variables, so the page renders as in the lab.
//   node benchmarks/browser/build.mjs
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const out = join(here, 'dist');
mkdirSync(out, { recursive: true });

await build({
  root,
  logLevel: 'warn',
  configFile: false,
  build: {
    outDir: out,
    emptyOutDir: false,
    minify: true,
    lib: {
      entry: join(here, 'entry.ts'),
      name: 'gpusightBenchEntry',
      formats: ['iife'],
      fileName: () => 'bench.js'
    }
  }
});

// The theme's variables (--jp-*), from the JupyterLab in the project's venv.
function themeCss(name) {
  const base = join(
    root,
    '.venv',
    'share',
    'jupyter',
    'lab',
    'themes',
    '@jupyterlab',
    name
  );
  try {
    const css = readFileSync(join(base, 'index.css'), 'utf-8');
    // Keep only the :root variable block; the rest styles JupyterLab's own widgets.
    const m = css.match(/:root\s*\{[^}]*\}/g);
    return m ? m.join('\n') : '';
  } catch {
    return '';
  }
}

const js = readFileSync(join(out, 'bench.js'), 'utf-8');
for (const [file, theme] of [
  ['page.html', 'theme-light-extension'],
  ['page-dark.html', 'theme-dark-extension']
]) {
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpusight render benchmark</title>
<style>${themeCss(theme)}
body { margin: 16px; background: var(--jp-layout-color0); max-width: 900px; }</style>
</head><body><div id="host"></div>
<script>${js.replace(/<\/script/gi, '<\\/script')}</script></body></html>
`;
  writeFileSync(join(out, file), html);
}
console.log(
  `built ${readdirSync(out).join(', ')} in ${out} (bundle ${(js.length / 1024).toFixed(1)} KiB)`
);
