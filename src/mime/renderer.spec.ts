// @vitest-environment happy-dom
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { describe, expect, it, vi } from 'vitest';
import full from '../report/fixtures/full-report.json';
import {
  REPORT_MIME_TYPE,
  REPORT_RENDERER_RANK,
  RenderedReport,
  createReportRendererFactory
} from './renderer';
import { mimePlugin } from './plugin';

// The plugin needs only these packages' tokens; their real modules pull in all of JupyterLab's
// UI, which does not load outside a browser build.
vi.mock('@jupyterlab/notebook', () => ({
  INotebookTracker: {},
  NotebookActions: {}
}));
vi.mock('@jupyterlab/rendermime', () => ({ IRenderMimeRegistry: {} }));

/** An output's model as JupyterLab hands it to a renderer (here: untrusted, as from disk). */
function mimeModel(data: unknown): IRenderMime.IMimeModel {
  return {
    trusted: false,
    data: { [REPORT_MIME_TYPE]: data, 'text/plain': 'gpusight report: …' },
    metadata: {},
    setData: () => undefined
  } as unknown as IRenderMime.IMimeModel;
}

function create(insertable = false): RenderedReport {
  const factory = createReportRendererFactory({ insertable });
  const renderer = factory.createRenderer({
    mimeType: REPORT_MIME_TYPE
  } as IRenderMime.IRendererOptions);
  expect(renderer).toBeInstanceOf(RenderedReport);
  document.body.appendChild(renderer.node);
  return renderer as RenderedReport;
}

describe('report renderer factory', () => {
  it('claims the report type, safely, ahead of the HTML fallback', () => {
    const factory = createReportRendererFactory();
    expect(factory.mimeTypes).toEqual(['application/vnd.gpusight.report+json']);
    // Safe: a notebook reopened from disk (untrusted) still draws the report.
    expect(factory.safe).toBe(true);
    // JupyterLab's text/html factory has rank 50; the lower rank wins.
    expect(factory.defaultRank).toBe(REPORT_RENDERER_RANK);
    expect(REPORT_RENDERER_RANK).toBeLessThan(50);
  });
});

describe('RenderedReport', () => {
  it('draws a report from untrusted output data', async () => {
    const renderer = create();
    await renderer.renderModel(mimeModel(full));
    const report = renderer.node.querySelector('gs-report');
    expect(report).toBe(renderer.report);
    expect(renderer.node.classList).toContain('jp-GpusightRenderedReport');
    expect(renderer.node.dataset['mimeType']).toBe(REPORT_MIME_TYPE);
    expect(report?.validation?.ok).toBe(true);
    expect(report?.shadowRoot?.querySelector('gs-verdict')).not.toBeNull();
    expect(report?.shadowRoot?.querySelector('gs-error')).toBeNull();
    expect(report?.insertable).toBe(false);
  });

  it('validates first: a malformed report is an error naming the field', async () => {
    const renderer = create();
    await renderer.renderModel(
      mimeModel({ ...full, findings: [{ ...full.findings[0], severity: 'x' }] })
    );
    const report = renderer.report;
    expect(report.validation).toMatchObject({
      ok: false,
      path: 'findings[0].severity'
    });
    expect(report.shadowRoot?.querySelector('gs-error')).not.toBeNull();
    expect(report.shadowRoot?.querySelector('gs-verdict')).toBeNull();
  });

  it('re-renders in place when the output changes', async () => {
    const renderer = create();
    await renderer.renderModel(mimeModel({ ...full, verdict: 'bad' }));
    expect(renderer.report.validation?.ok).toBe(false);
    await renderer.renderModel(mimeModel(full));
    expect(renderer.node.querySelectorAll('gs-report')).toHaveLength(1);
    expect(renderer.report.validation?.ok).toBe(true);
  });

  it('offers Insert only where the plugin found a notebook', async () => {
    const renderer = create(true);
    await renderer.renderModel(mimeModel(full));
    expect(renderer.report.insertable).toBe(true);
  });
});

describe('mimePlugin', () => {
  it('adds the factory to the registry, insertable only with a notebook tracker', () => {
    for (const tracker of [null, {}]) {
      const added: IRenderMime.IRendererFactory[] = [];
      const rendermime = {
        addFactory: (f: IRenderMime.IRendererFactory) => added.push(f)
      };
      const shell = document.createElement('div');
      const app = { shell: { node: shell } };
      mimePlugin.activate(app as never, rendermime as never, tracker as never);
      expect(added).toHaveLength(1);
      expect(added[0].mimeTypes).toEqual([REPORT_MIME_TYPE]);
      const renderer = added[0].createRenderer({
        mimeType: REPORT_MIME_TYPE
      } as IRenderMime.IRendererOptions) as RenderedReport;
      expect(renderer.report.insertable).toBe(tracker !== null);
    }
  });
});
