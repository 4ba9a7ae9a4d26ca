import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import full from '../report/fixtures/full-report.json';
import type { GpusightReport } from '../report';
import {
  buildPage,
  embedJson,
  escapeHtmlText,
  escapeJsonForHtml,
  exportFileName,
  fillTemplate,
  reportTitle,
  sharedReport
} from './page';

const root = join(__dirname, '..', '..');
const staticDir = join(root, 'python_pkg', 'gpusight', 'static');
const templatePath = join(staticDir, 'gpusight-report.template.html');
const bundlePath = join(staticDir, 'gpusight-report.js');
const python = join(root, '.venv', 'bin', 'python');
const built = existsSync(templatePath) && existsSync(bundlePath);

const HOSTILE = [
  '</script><img src=x onerror=window.__pwned=1>',
  '<!--',
  '</SCRIPT >',
  'a & b > c',
  'line\u2028separator\u2029paragraph',
  '@@GPUSIGHT_SCRIPT@@',
  '"quoted" \'single\' \\ backslash',
  'ünïcødé ✓ 🚀'
];

describe('escapeJsonForHtml', () => {
  it('leaves no raw <, >, &, U+2028 or U+2029, and the JSON means the same', () => {
    for (const s of HOSTILE) {
      const embedded = embedJson({ s, list: [s] });
      expect(embedded).not.toMatch(/[<>&\u2028\u2029]/);
      expect(JSON.parse(embedded)).toEqual({ s, list: [s] });
    }
  });

  it('writes the escapes as \\u sequences', () => {
    expect(escapeJsonForHtml('"</script>&\u2028"')).toBe(
      '"\\u003c/script\\u003e\\u0026\\u2028"'
    );
  });
});

describe('escapeHtmlText', () => {
  it('escapes markup and quotes', () => {
    expect(escapeHtmlText(`<b a="1" c='2'>&</b>`)).toBe(
      '&lt;b a=&quot;1&quot; c=&#39;2&#39;&gt;&amp;&lt;/b&gt;'
    );
  });
});

describe('fillTemplate', () => {
  const values = { TITLE: 't', VIEW: 'report', DATA: 'd', SCRIPT: 's' };

  it('fills in one pass: a value that reads like a slot stays text', () => {
    const out = fillTemplate(
      '@@GPUSIGHT_TITLE@@|@@GPUSIGHT_VIEW@@|@@GPUSIGHT_DATA@@|@@GPUSIGHT_SCRIPT@@',
      { ...values, DATA: '@@GPUSIGHT_SCRIPT@@' }
    );
    expect(out).toBe('t|report|@@GPUSIGHT_SCRIPT@@|s');
  });

  it('refuses unknown and unused slots', () => {
    expect(() => fillTemplate('@@GPUSIGHT_OTHER@@', values)).toThrow(
      /unknown slot/
    );
    expect(() => fillTemplate('@@GPUSIGHT_TITLE@@', values)).toThrow(/no slot/);
  });
});

describe('names', () => {
  it('titles and file names come from the report', () => {
    const r = full as unknown as GpusightReport;
    expect(reportTitle(r)).toBe(
      'resnet50 training step, batch 64 (2026-03-02T10:21:37Z)'
    );
    expect(exportFileName(r)).toBe(
      'gpusight-diagnose-2026-03-02T10-21-37.html'
    );
    expect(
      exportFileName({ ...r, kind: '../../x' as GpusightReport['kind'] })
    ).toBe('gpusight-x-2026-03-02T10-21-37.html');
  });
});

describe.skipIf(!built)('the built page', () => {
  const template = built ? readFileSync(templatePath, 'utf-8') : '';
  const bundle = built ? readFileSync(bundlePath, 'utf-8') : '';

  it('holds the data inertly and the bundle verbatim', () => {
    const report = JSON.parse(JSON.stringify(full)) as GpusightReport;
    report.title = HOSTILE.join(' ');
    const page = buildPage(
      template,
      bundle,
      { view: 'report', data: report },
      reportTitle(report)
    );
    // The only </script> tags are the two the template closes.
    expect(page.match(/<\/script/gi)).toHaveLength(2);
    expect(page).toContain(`<script>${bundle}</script>`);
    const data =
      /<script type="application\/json" id="gpusight-report" data-gpusight="report">([^<]*)<\/script>/.exec(
        page
      );
    expect(data).not.toBeNull();
    expect(JSON.parse(data![1])).toEqual(report);
    expect(page).toContain(
      `<title>${escapeHtmlText(reportTitle(report))}</title>`
    );
  });

  it.skipIf(!existsSync(python))(
    'is the page Python writes for the same report',
    () => {
      const fixture = join(
        root,
        'src',
        'report',
        'fixtures',
        'full-report.json'
      );
      const fromPython = execFileSync(
        python,
        [
          '-c',
          'import sys; from gpusight.html_export import report_page; sys.stdout.buffer.write(report_page(sys.argv[1]).encode())',
          fixture
        ],
        { encoding: 'utf-8', maxBuffer: 16 * 1024 * 1024 }
      );
      const report = JSON.parse(
        readFileSync(fixture, 'utf-8')
      ) as GpusightReport;
      const fromBrowser = buildPage(
        template,
        bundle,
        { view: 'report', data: sharedReport(report) },
        reportTitle(report)
      );
      // Same document; the JSON may differ in number formatting only (Python writes 1.0).
      const split = (page: string) => {
        const m =
          /^([\s\S]*data-gpusight="report">)([^<]*)(<\/script>[\s\S]*)$/.exec(
            page
          );
        expect(m).not.toBeNull();
        return { head: m![1], data: JSON.parse(m![2]) as unknown, tail: m![3] };
      };
      const a = split(fromPython);
      const b = split(fromBrowser);
      expect(a.head).toBe(b.head);
      expect(a.tail).toBe(b.tail);
      expect(a.data).toEqual(b.data);
    },
    30_000
  );
});
