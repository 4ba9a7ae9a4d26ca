/**
 * The report as a notebook output: `application/vnd.gpusight.report+json`, whose data is the
 * report itself (Python's `Report._repr_mimebundle_`, gpusight/jupyter/display.py). The output
 * holds everything it needs, so it draws in a saved notebook reopened without a kernel, where a
 * widget would draw nothing.
 */
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';
import '../view/report';
import type { GsReport } from '../view/report';

/** Python's `gpusight.jupyter.display.REPORT_MIMETYPE`. */
export const REPORT_MIME_TYPE = 'application/vnd.gpusight.report+json';

/** Ahead of text/html (50), so that JupyterLab draws the report, not its HTML fallback. */
export const REPORT_RENDERER_RANK = 40;

/**
 * One output's `<gs-report>`. The element is the gate: it validates whatever arrives
 * (src/report's `validateReport`) and shows a report that fails as an error naming the field.
 */
export class RenderedReport extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions, insertable = false) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('jp-GpusightRenderedReport');
    // As JupyterLab's own renderers mark their output.
    this.node.dataset['mimeType'] = options.mimeType;
    this._report = document.createElement('gs-report');
    this._report.insertable = insertable;
    this.node.appendChild(this._report);
  }

  /** The `<gs-report>` that draws this output. */
  get report(): GsReport {
    return this._report;
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    // Untrusted data is fine: report strings only ever become text (docs/architecture.md, principle 5).
    this._report.report = model.data[this._mimeType] ?? null;
    await this._report.updateComplete;
  }

  private readonly _mimeType: string;
  private readonly _report: GsReport;
}

export interface IReportRendererOptions {
  /** A notebook handles `gs-insert-cell` here: fix cards offer "Insert cell below". */
  insertable?: boolean;
}

/** The factory for JupyterLab's render-mime registry. */
export function createReportRendererFactory(
  options: IReportRendererOptions = {}
): IRenderMime.IRendererFactory {
  return {
    // Safe: it draws untrusted outputs (a notebook reopened from disk) in full.
    safe: true,
    mimeTypes: [REPORT_MIME_TYPE],
    defaultRank: REPORT_RENDERER_RANK,
    createRenderer: rendererOptions =>
      new RenderedReport(rendererOptions, options.insertable ?? false)
  };
}
