/** `<gs-whatifs>`: the experiments gpusight ran to prove a fix: speedups with their noise bands. */
import { html, nothing } from 'lit';
import { property } from 'lit/decorators.js';
import { formatMs } from '../charts/format';
import {
  renderSpeedups,
  speedupRows,
  speedupWords,
  type SpeedupRow
} from '../charts/speedups';
import { scopeMismatchNote } from '../charts/scope';
import type { WhatIf } from '../report';
import { ChartElement } from './chart-element';
import './fix-card';
import { chartStyles } from './chart-styles';
import { define } from './define';
import { baseStyles, sectionStyles } from './styles';
import { drawSweeps, whatIfAxes, whatIfSweepTitle, withSweeps } from './sweeps';
import { repeatOf } from './shown-gains';
import { speedupColor } from './tokens';

export class GsWhatIfs extends ChartElement {
  static override styles = [baseStyles, sectionStyles, chartStyles];

  @property({ attribute: false }) whatIfs: WhatIf[] = [];
  /** Passed to the fix cards: the host handles `gs-insert-cell`. */
  @property({ type: Boolean }) insertable = false;

  private _rows: SpeedupRow[] = [];

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightWhatIfs');
  }

  protected override willUpdate(): void {
    this._rows = speedupRows(this.whatIfs ?? []);
  }

  private get _sweeps(): WhatIf[] {
    return withSweeps(this.whatIfs);
  }

  protected override render() {
    if (!this._rows.length) {
      return nothing;
    }
    return html`<section class="jp-GpusightWhatIfs" aria-labelledby="title">
      <h3 id="title">What-if experiments (measured)</h3>
      <div class="jp-GpusightWhatIfs-chart"></div>
      <div class="jp-Gpusight-srOnly">
        <table class="jp-Gpusight-table">
          <caption>
            What-if experiments
          </caption>
          <thead>
            <tr>
              <th scope="col">Change</th>
              <th scope="col">Before</th>
              <th scope="col">After</th>
              <th scope="col">Speedup</th>
              <th scope="col">Noise</th>
            </tr>
          </thead>
          <tbody>
            ${this._rows.map(
              r =>
                html`<tr>
                  <th scope="row">${r.change}</th>
                  <td>${r.beforeMs === null ? '–' : formatMs(r.beforeMs)}</td>
                  <td>${r.afterMs === null ? '–' : formatMs(r.afterMs)}</td>
                  <td>
                    ${
                      r.speedup === null
                        ? r.skipped
                        : speedupWords(r.speedup, r.scope)
                    }
                  </td>
                  <td>${r.noisePct === null ? '–' : `±${r.noisePct}%`}</td>
                </tr>`
            )}
          </tbody>
        </table>
      </div>
      ${this.whatIfs
        .filter(w => w.fix && !w.skipped && repeatOf(w) === null)
        .map(
          w =>
            html`<h4>Measured code: ${w.change}</h4>
              <gs-fix-card
                .fix=${w.fix}
                finding-id=${w.finding_id ?? ''}
                ?insertable=${this.insertable}
              ></gs-fix-card>`
        )}
      ${this._sweeps.map((w, i) => this._sweep(w, i))}
    </section>`;
  }

  private _sweep(w: WhatIf, i: number) {
    const note = scopeMismatchNote(w);
    return html`<h4>${whatIfSweepTitle(w)}</h4>
      ${note ? html`<p class="jp-GpusightWhatIfs-scope">${note}</p>` : nothing}
      <div class="jp-GpusightWhatIfs-sweep" data-index=${i}></div>`;
  }

  protected override readonly chartHostClass = 'jp-GpusightWhatIfs-chart';

  protected drawCharts(width: number): void {
    const host = this.chartHost('jp-GpusightWhatIfs-chart');
    if (!host) {
      return;
    }
    renderSpeedups(host, this._rows, {
      width: width,
      color: row => speedupColor(row.speedup, row.significant)
    });
    drawSweeps(
      this.renderRoot,
      'jp-GpusightWhatIfs-sweep',
      this._sweeps,
      width,
      w => ({ title: whatIfSweepTitle(w), ...whatIfAxes(w) })
    );
  }
}

define('gs-whatifs', GsWhatIfs);

declare global {
  interface HTMLElementTagNameMap {
    'gs-whatifs': GsWhatIfs;
  }
}
