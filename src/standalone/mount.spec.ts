// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from 'vitest';
import full from '../report/fixtures/full-report.json';
import { beforeAfter } from '../report/fixtures/before-after';
import { embedJson } from '../export/page';
import type { GsCompare } from '../view/compare';
import type { GsReport } from '../view/report';
import { FALLBACK_ATTRIBUTE, MOUNTED_ATTRIBUTE, mountAll } from './mount';
import { THEME_CLASS, THEME_STYLE_ATTRIBUTE } from './theme';

/** Markup as Python's notebook_html / the page template write it (no script: mounted by hand). */
function output(kind: string, jsonText: string): HTMLDivElement {
  const host = document.createElement('div');
  const data = document.createElement('script');
  data.type = 'application/json';
  data.dataset.gpusight = kind;
  data.textContent = jsonText;
  const fallback = document.createElement('p');
  fallback.setAttribute(FALLBACK_ATTRIBUTE, '');
  fallback.textContent = 'the report, as text';
  host.append(data, fallback);
  document.body.append(host);
  return host;
}

afterEach(() => {
  document.body.replaceChildren();
  document.head.replaceChildren();
});

describe('mountAll', () => {
  it('draws each report after its data, once, and hides the text fallback', async () => {
    const a = output('report', embedJson(full));
    const b = output('report', embedJson(full));
    const added = mountAll(document);
    expect(added.map(e => e.tagName)).toEqual(['GS-REPORT', 'GS-REPORT']);
    for (const host of [a, b]) {
      const el = host.querySelector('gs-report') as GsReport;
      expect(el.previousElementSibling?.getAttribute('data-gpusight')).toBe(
        'report'
      );
      expect(
        host.querySelector('script')!.hasAttribute(MOUNTED_ATTRIBUTE)
      ).toBe(true);
      expect(
        host.querySelector<HTMLElement>(`[${FALLBACK_ATTRIBUTE}]`)!.hidden
      ).toBe(true);
      await el.updateComplete;
      expect(el.validation?.ok).toBe(true);
    }
    // A second call (a later notebook output's loader) adds nothing twice.
    expect(mountAll(document)).toEqual([]);
    output('report', embedJson(full));
    expect(mountAll(document)).toHaveLength(1);
    expect(document.querySelectorAll('gs-report')).toHaveLength(3);
  });

  it('gives the page the default theme once, where it has none', () => {
    const a = output('report', embedJson(full));
    const b = output('report', embedJson(full));
    mountAll(document);
    expect(a.classList.contains(THEME_CLASS)).toBe(true);
    expect(b.classList.contains(THEME_CLASS)).toBe(true);
    expect(
      document.querySelectorAll(`style[${THEME_STYLE_ATTRIBUTE}]`)
    ).toHaveLength(1);
  });

  it('draws a comparison from {before, after}', async () => {
    const { before, after } = beforeAfter(full);
    output('compare', embedJson({ before, after }));
    const [el] = mountAll(document) as GsCompare[];
    expect(el.tagName).toBe('GS-COMPARE');
    await el.updateComplete;
    expect(el.comparison?.speedup).toBeCloseTo(2, 6);
  });

  it('shows broken data as an error, not a crash', () => {
    output('report', '{"schema_version": "1.0", ');
    output('compare', embedJson({ before: full }));
    output('chart', embedJson(full));
    const errors = mountAll(document);
    expect(errors.map(e => e.tagName)).toEqual([
      'GS-ERROR',
      'GS-ERROR',
      'GS-ERROR'
    ]);
    const [json, compare, kind] = errors as unknown as {
      heading: string;
      message: string;
    }[];
    expect(json.message).toMatch(/not valid JSON/);
    expect(compare.message).toMatch(/"before" and an "after"/);
    expect(kind.heading).toMatch(/newer gpusight/);
  });

  it('a report with a malformed field is named by <gs-report>', async () => {
    const bad = JSON.parse(JSON.stringify(full));
    bad.findings[0].severity = 'fatal';
    output('report', embedJson(bad));
    const [el] = mountAll(document) as GsReport[];
    await el.updateComplete;
    expect(el.validation).toMatchObject({
      ok: false,
      path: 'findings[0].severity'
    });
  });

  it('while the page loads, leaves a report whose data is still arriving for later', () => {
    // As the parser leaves it mid-way: the first output whole, the second's JSON cut short and
    // nothing after it yet (an exported notebook with several reports, read over the network).
    const first = output('report', embedJson(full));
    const text = embedJson(full);
    const second = document.createElement('div');
    const data = document.createElement('script');
    data.type = 'application/json';
    data.dataset.gpusight = 'report';
    data.textContent = text.slice(0, text.length / 2);
    second.append(data);
    document.body.append(second);

    const added = mountAll(document, true);
    expect(added).toHaveLength(1);
    expect(first.querySelector('gs-report')).not.toBeNull();
    expect(data.hasAttribute(MOUNTED_ATTRIBUTE)).toBe(false);
    expect(document.querySelector('gs-error')).toBeNull();

    // The rest arrives and the parser moves past the element: now it is drawn, as a report.
    data.textContent = text;
    second.after(document.createElement('div'));
    const later = mountAll(document, true);
    expect(later.map(e => e.tagName)).toEqual(['GS-REPORT']);
    expect(document.querySelector('gs-error')).toBeNull();
  });

  it('once the page has loaded, every data element is complete', () => {
    output('report', embedJson(full));
    expect(mountAll(document, false)).toHaveLength(1);
  });
});
