/**
 * Written by scripts/build-standalone.mjs into lib/export/page-assets.js (build output): the page
 * template and the standalone bundle, as strings, for the browser-side export.
 */
/** python_pkg/gpusight/static/gpusight-report.template.html */
export declare const PAGE_TEMPLATE: string;
/** python_pkg/gpusight/static/gpusight-report.js */
export declare const BUNDLE: string;
