/**
 * The standalone bundle: the report's lit elements and d3 charts (the same modules the
 * labextension draws with), and nothing of JupyterLab. scripts/build-standalone.mjs builds it
 * into one classic script, python_pkg/gpusight/static/gpusight-report.js, which is inlined in
 * exported HTML files and (compressed) in `Report._repr_html_` for frontends without the extension.
 *
 * It draws every report the page holds as inert JSON (see ./standalone/mount), now and once the
 * page has loaded, so it works wherever the script sits in the page. As a classic script it
 * defines one global, `gpusightReport` (this module's exports): later notebook outputs call
 * `gpusightReport.mountAll(document)` instead of loading the bundle again.
 */
import { mountAll } from './standalone/mount';

export { mountAll };

mountAll(document);
if (document.readyState === 'loading') {
  document.addEventListener('DOMContentLoaded', () => mountAll(document), {
    once: true
  });
}
