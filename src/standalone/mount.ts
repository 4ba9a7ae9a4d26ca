/**
 * Turns inert report data in a page into report elements. Each report in a page is
 *
 *   <script type="application/json" data-gpusight="report">{...}</script>     one report
 *   <script type="application/json" data-gpusight="compare">{"before": {...}, "after": {...}}</script>
 *
 * and the element that draws it is inserted right after. The same markup serves the exported file
 * (one per page, id="gpusight-report") and notebook outputs (`Report._repr_html_`: any number per
 * page, so no ids are relied on and nothing depends on `document.currentScript`, which some
 * notebook frontends do not set). Mounting is idempotent: each data element is marked once done.
 */
import '../view/compare';
import type { GsCompare } from '../view/compare';
import type { GsError } from '../view/error';
import '../view/index';
import type { GsReport } from '../view/report';
import { ensureTheme } from './theme';

export const DATA_SELECTOR = 'script[type="application/json"][data-gpusight]';
export const MOUNTED_ATTRIBUTE = 'data-gpusight-mounted';
/** Shown where scripts do not run (a static viewer); hidden once the report is drawn. */
export const FALLBACK_ATTRIBUTE = 'data-gpusight-fallback';

export type MountedView = GsReport | GsCompare | GsError;

function error(heading: string, message: string, hint: string): GsError {
  const el = document.createElement('gs-error');
  el.heading = heading;
  el.message = message;
  el.hint = hint;
  return el;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The element for one data block; malformed data becomes a `<gs-error>` that says why. */
export function viewFor(kind: string | undefined, text: string): MountedView {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    return error(
      'This report cannot be shown',
      `The embedded report is not valid JSON (${err instanceof Error ? err.message : String(err)}).`,
      'The file was damaged or edited by hand: export it again with gpusight.'
    );
  }
  if (kind === 'report') {
    const el = document.createElement('gs-report');
    // <gs-report> validates it and names the bad field if there is one.
    el.report = data;
    return el;
  }
  if (kind === 'compare') {
    if (!isObject(data) || !('before' in data) || !('after' in data)) {
      return error(
        'This comparison cannot be shown',
        'The embedded data needs a "before" and an "after" report.',
        'Write the page with gpusight diff before.json after.json --html page.html.'
      );
    }
    const el = document.createElement('gs-compare');
    el.reportBefore = data.before;
    el.reportAfter = data.after;
    return el;
  }
  return error(
    'This page needs a newer gpusight',
    `It holds a view called ${JSON.stringify(kind ?? '')}, which this version does not know.`,
    'Open the file with the gpusight version that wrote it.'
  );
}

/**
 * Whether the parser has read all of a data element. While a page loads, an element is in the
 * DOM from its start tag on and its text grows as the bytes arrive: a report later in a page
 * with several (an exported notebook) can be half there when an earlier output's script runs.
 * Once any node follows it in document order, the parser has passed its end tag.
 */
export function isComplete(data: Element, loading: boolean): boolean {
  if (!loading) {
    return true;
  }
  for (let node: Node | null = data; node; node = node.parentNode) {
    if (node.nextSibling) {
      return true;
    }
  }
  return false;
}

/**
 * Draw every report in `root` not drawn yet and complete; returns the elements added. One still
 * being read is left for a later call (the next output's loader, or DOMContentLoaded).
 */
export function mountAll(
  root: ParentNode = document,
  loading: boolean = document.readyState === 'loading'
): MountedView[] {
  const added: MountedView[] = [];
  for (const data of root.querySelectorAll<HTMLScriptElement>(DATA_SELECTOR)) {
    if (data.hasAttribute(MOUNTED_ATTRIBUTE) || !isComplete(data, loading)) {
      continue;
    }
    data.setAttribute(MOUNTED_ATTRIBUTE, '');
    const view = viewFor(data.dataset.gpusight, data.textContent ?? '');
    data.after(view);
    const host = data.parentElement;
    if (host) {
      ensureTheme(host);
      for (const fallback of host.querySelectorAll<HTMLElement>(
        `:scope > [${FALLBACK_ATTRIBUTE}]`
      )) {
        fallback.hidden = true;
      }
    }
    added.push(view);
  }
  return added;
}
