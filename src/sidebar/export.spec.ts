// @vitest-environment happy-dom
/**
 * The sidebar's Export is the report's own Export HTML: the same exporter, the same file name,
 * the same page. The real save path (src/export/save.ts, as download.ts wires it) runs with a
 * stub download sink and the page built from a template with the build's slots (the build's
 * assets are not there in a unit test).
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { setReportExporter } from '../export/exporter';
import { buildPage, reportTitle, sharedReport } from '../export/page';
import { saveReportHtml } from '../export/save';
import { validateReport, type GpusightReport } from '../report';
import full from '../report/fixtures/full-report.json';
import type { GsReport } from '../view/report';
import type { KernelMessage } from './messages';
import { GpusightSidebar } from './panel';

// The icon pulls in JupyterLab's web components, which need a browser; it is no part of this.
vi.mock('./icon', () => ({ gpuIcon: undefined }));

const TEMPLATE =
  '<title>@@GPUSIGHT_TITLE@@</title>@@GPUSIGHT_VIEW@@<script>@@GPUSIGHT_DATA@@</script><script>@@GPUSIGHT_SCRIPT@@</script>';

/** ./download's exportHtml, with the template above for the build's. */
const build = async (r: GpusightReport) =>
  buildPage(
    TEMPLATE,
    'bundle',
    { view: 'report', data: sharedReport(r) },
    reportTitle(r)
  );

const validated = validateReport(full);
if (!validated.ok) {
  throw new Error(validated.error);
}
const REPORT: GpusightReport = validated.report;

/** A notebook's session context that never connects: the panel only needs to hold a report. */
function stubContext(): ISessionContext {
  const owner = {};
  return {
    session: null,
    kernelDisplayName: 'Python 3',
    ready: new Promise<void>(() => undefined),
    disposed: new Signal(owner),
    kernelChanged: new Signal(owner),
    statusChanged: new Signal(owner)
  } as unknown as ISessionContext;
}

/** A shown panel following a notebook whose kernel has shown `report` (not from a button). */
function panelShowing(report: GpusightReport): GpusightSidebar {
  const panel = new GpusightSidebar();
  Widget.attach(panel, document.body);
  panel.hide();
  panel.show();
  const widget = new Widget();
  panel.follow({
    kind: 'notebook',
    widget,
    sessionContext: stubContext(),
    path: () => 'a.ipynb'
  });
  const message: KernelMessage = {
    type: 'report',
    request: null,
    entry: {
      id: 'r1',
      origin: 'watch',
      kind: report.kind,
      title: report.title ?? null,
      created_at: report.created_at,
      summary: null
    },
    report
  };
  // The bridge delivers kernel messages to the session this way.
  (
    panel.session as unknown as { _onMessage(m: KernelMessage): void }
  )._onMessage(message);
  return panel;
}

const saved: { name: string; text: string }[] = [];

function useRealExporter() {
  setReportExporter(r =>
    saveReportHtml(r, build, (name, text) => {
      saved.push({ name, text });
    })
  );
}

afterEach(() => {
  setReportExporter(null);
  saved.length = 0;
  document.body.replaceChildren();
});

describe("the sidebar's Export", () => {
  it("is the report view's Export HTML: same file name, same page", async () => {
    useRealExporter();
    const view = document.createElement('gs-report') as GsReport;
    view.report = REPORT;
    document.body.append(view);
    await view.updateComplete;
    view
      .shadowRoot!.querySelector<HTMLButtonElement>(
        'button.jp-GpusightReport-export'
      )!
      .click();
    await vi.waitFor(() => expect(saved).toHaveLength(1));

    const panel = panelShowing(REPORT);
    expect(panel.canExport).toBe(true);
    expect(await panel.exportReport()).toBe(
      'gpusight-diagnose-2026-03-02T10-21-37.html'
    );
    expect(saved).toHaveLength(2);
    expect(saved[1].name).toBe(saved[0].name);
    expect(saved[1].text).toBe(saved[0].text);
    expect(saved[1].text).toContain('<script>bundle</script>');
    expect(panel.session?.notice).toEqual({
      kind: 'info',
      text: 'Exported gpusight-diagnose-2026-03-02T10-21-37.html'
    });
    panel.dispose();
  });

  it('is enabled for a report the kernel showed, and only then', () => {
    useRealExporter();
    const empty = new GpusightSidebar();
    expect(empty.canExport).toBe(false);
    const panel = panelShowing(REPORT);
    expect(panel.canExport).toBe(true);
    setReportExporter(null);
    expect(panel.canExport).toBe(false);
    panel.dispose();
    empty.dispose();
  });

  it('says why an export failed', async () => {
    setReportExporter(() => Promise.reject(new Error('disk full')));
    const panel = panelShowing(REPORT);
    expect(await panel.exportReport()).toBeNull();
    expect(panel.session?.notice).toEqual({
      kind: 'error',
      text: 'Export failed: disk full'
    });
    panel.dispose();
  });
});
