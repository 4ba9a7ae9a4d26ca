/**
 * The report widget's view: `<gs-progress>` while the kernel reports progress, `<gs-report>` once
 * the report arrives. The elements do all the drawing; this only maps model state onto them.
 */
import { DOMWidgetView } from '@jupyter-widgets/base';
import '../view/progress';
import '../view/report';
import type { GsProgress } from '../view/progress';
import type { GsReport } from '../view/report';
import type { WidgetProgress } from './model';

function isProgress(value: unknown): value is WidgetProgress {
  return typeof value === 'object' && value !== null && 'stage' in value;
}

/** An empty dict is the trait's default: no report yet. */
function hasReport(value: unknown): boolean {
  return (
    typeof value === 'object' && value !== null && Object.keys(value).length > 0
  );
}

export class ReportView extends DOMWidgetView {
  /**
   * Set by the plugin when a notebook tracker handles `gs-insert-cell`, so that fix cards offer
   * "Insert cell below" only where it can work.
   */
  static insertable = false;

  private _progress: GsProgress | null = null;
  private _report: GsReport | null = null;

  override render(): void {
    this.el.classList.add('jp-GpusightWidget');
    this._sync();
    this.listenTo(this.model, 'change:report change:progress', this._sync);
  }

  private _sync(): void {
    const progress: unknown = this.model.get('progress');
    const report: unknown = this.model.get('report');
    if (isProgress(progress)) {
      if (!this._progress) {
        this._progress = document.createElement('gs-progress');
        this.el.prepend(this._progress);
      }
      this._progress.stage = String(progress.stage ?? '');
      this._progress.fraction =
        typeof progress.fraction === 'number' ? progress.fraction : null;
    } else if (this._progress) {
      this._progress.remove();
      this._progress = null;
    }
    if (hasReport(report)) {
      if (!this._report) {
        this._report = document.createElement('gs-report');
        this._report.insertable = ReportView.insertable;
        this.el.appendChild(this._report);
      }
      // <gs-report> validates whatever arrives and shows a named error if it is malformed.
      this._report.report = report;
    } else if (this._report) {
      this._report.remove();
      this._report = null;
    }
  }
}
