// The JavaScript the extension adds to JupyterLab: every .js file of the built labextension
// (python_pkg/gpusight/labextension/static), raw and gzipped, recorded in
// benchmarks/results/bundle-size.json.
//   PATH=.venv/bin:$PATH npm run build:prod && node benchmarks/browser/bundle-size.mjs
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const dir = join(root, 'python_pkg', 'gpusight', 'labextension', 'static');
const files = readdirSync(dir)
  .filter(f => f.endsWith('.js'))
  .map(f => {
    const buf = readFileSync(join(dir, f));
    const text = buf.toString('utf-8');
    return {
      file: f,
      // The HTML export's page template embeds the whole standalone renderer as a string; it is
      // a dynamic import, fetched only when the user exports.
      role: text.includes('@@GPUSIGHT_TITLE@@')
        ? 'HTML-export page template (lazy: loaded on export)'
        : null,
      bytes: buf.length,
      gzip_bytes: gzipSync(buf, { level: 9 }).length
    };
  })
  .sort((a, b) => b.bytes - a.bytes);

const total = files.reduce((a, f) => a + f.bytes, 0);
const totalGz = files.reduce((a, f) => a + f.gzip_bytes, 0);
const lazy = files.filter(f => f.role).reduce((a, f) => a + f.bytes, 0);
const out = {
  what: 'JavaScript of the production labextension (python_pkg/gpusight/labextension/static/*.js): everything gpusight adds to JupyterLab, including its own copies of lit and the d3 modules (shared packages JupyterLab already provides are not bundled)',
  command:
    'PATH=.venv/bin:$PATH npm run build:prod && node benchmarks/browser/bundle-size.mjs',
  recorded_at: new Date().toISOString(),
  total_bytes: total,
  total_kib: +(total / 1024).toFixed(1),
  total_gzip_kib: +(totalGz / 1024).toFixed(1),
  without_export_template_kib: +((total - lazy) / 1024).toFixed(1),
  files
};
writeFileSync(
  join(root, 'benchmarks', 'results', 'bundle-size.json'),
  JSON.stringify(out, null, 2) + '\n'
);
console.log(
  `labextension JS: ${out.total_kib} KiB (${out.total_gzip_kib} KiB gzipped) in ` +
    `${files.length} files; ${out.without_export_template_kib} KiB without the lazily ` +
    'loaded HTML-export template'
);
