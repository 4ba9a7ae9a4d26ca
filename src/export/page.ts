/**
 * The exported HTML file, filled in. The page itself (doctype, Content-Security-Policy with the
 * script's hash, the inline bundle) is a template written once at build time by
 * scripts/build-standalone.mjs; Python (python_pkg/gpusight/html_export.py) and the browser fill
 * the same template's slots by the same rules, so `gpusight html`, `Report.save_html()` and the
 * Export button write the same document (the JSON inside may differ in number formatting only).
 *
 * The report travels as inert data, `<script type="application/json" id="gpusight-report">`,
 * never as markup or code: `<`, `>`, `&`, U+2028 and U+2029 are escaped as `\u003c` etc., so no
 * string in the report can close the element or start a comment, and the JSON stays valid.
 */
import type { GpusightReport } from '../report';

/** The slots of the page template: `@@GPUSIGHT_<NAME>@@`. */
export type Slot = 'TITLE' | 'VIEW' | 'DATA' | 'SCRIPT';

export const SLOT_PATTERN = /@@GPUSIGHT_([A-Z]+)@@/g;

/** What the page shows: one report, or two compared. */
export type PageView = 'report' | 'compare';

export type PagePayload =
  | { view: 'report'; data: unknown }
  | { view: 'compare'; data: { before: unknown; after: unknown } };

const JSON_ESCAPES: Record<string, string> = {
  '<': '\\u003c',
  '>': '\\u003e',
  '&': '\\u0026',
  '\u2028': '\\u2028',
  '\u2029': '\\u2029'
};

/**
 * JSON text that is safe inside a `<script type="application/json">` element: none of `<`, `>`,
 * `&`, U+2028, U+2029 appears raw (they only ever occur inside JSON strings, where the escape means
 * the same character), so `</script>` or `<!--` in a report string cannot end the element.
 */
export function escapeJsonForHtml(json: string): string {
  return json.replace(/[<>&\u2028\u2029]/g, ch => JSON_ESCAPES[ch]);
}

/** The JSON of a value, escaped for embedding. */
export function embedJson(value: unknown): string {
  return escapeJsonForHtml(JSON.stringify(value));
}

const TEXT_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;'
};

/** Text for an HTML text node or attribute value. */
export function escapeHtmlText(text: string): string {
  return text.replace(/[&<>"']/g, ch => TEXT_ESCAPES[ch]);
}

/** The page title for one report, as Python's `page_title` writes it. */
export function reportTitle(report: GpusightReport): string {
  const name = report.title || `gpusight ${report.kind} report`;
  return `${name} (${report.created_at})`;
}

export const COMPARE_TITLE = 'gpusight: before and after';

/**
 * Fill the template's slots in one pass: text put into one slot is never searched for another,
 * so a report string that reads `@@GPUSIGHT_SCRIPT@@` stays that text.
 */
export function fillTemplate(
  template: string,
  values: Record<Slot, string>
): string {
  const seen = new Set<string>();
  const out = template.replace(SLOT_PATTERN, (match, name: string) => {
    if (!(name in values)) {
      throw new Error(`page template has an unknown slot ${match}`);
    }
    seen.add(name);
    return values[name as Slot];
  });
  for (const name of Object.keys(values)) {
    if (!seen.has(name)) {
      throw new Error(`page template has no slot @@GPUSIGHT_${name}@@`);
    }
  }
  return out;
}

/**
 * The whole page: `template` and `bundle` are the build's (gpusight-report.template.html and
 * gpusight-report.js). `title` is plain text.
 */
export function buildPage(
  template: string,
  bundle: string,
  payload: PagePayload,
  title: string
): string {
  return fillTemplate(template, {
    TITLE: escapeHtmlText(title),
    VIEW: payload.view,
    DATA: embedJson(payload.data),
    SCRIPT: bundle
  });
}

/**
 * The report as a page made to be shared carries it: without the host name (as
 * `gpusight html` leaves it out; the kernel side also replaces home and environment paths).
 */
export function sharedReport(report: GpusightReport): GpusightReport {
  if (!report.machine || !('hostname' in report.machine)) {
    return report;
  }
  const { hostname: _hostname, ...machine } = report.machine;
  void _hostname;
  return { ...report, machine };
}

/** A file name for a report: `gpusight-<kind>-<date>.html`, only safe characters. */
export function exportFileName(report: GpusightReport): string {
  const date = String(report.created_at ?? '')
    .slice(0, 19)
    .replace(/[^0-9A-Za-z]+/g, '-')
    .replace(/-+$/, '');
  const kind = String(report.kind ?? 'report').replace(/[^a-z]+/g, '');
  return `gpusight-${kind || 'report'}${date ? `-${date}` : ''}.html`;
}
