/** `<gs-benchmarks>`: what the hardware does against what it should, and any sweeps behind it. */
import { html, nothing } from 'lit';
import { property } from 'lit/decorators.js';
import {
  ceilingRows,
  renderCeilings,
  type CeilingRow
} from '../charts/ceilings';
import { formatPct, formatValue } from '../charts/format';
import type { Benchmark } from '../report';
import { ChartElement } from './chart-element';
import { define } from './define';
import { baseStyles, sectionStyles } from './styles';
import { CEILING_MARKER_COLOR, ceilingColor } from './tokens';
import { benchmarkAxes, drawSweeps, withSweeps } from './sweeps';
import { chartStyles } from './chart-styles';

export class GsBenchmarks extends ChartElement {
  static override styles = [baseStyles, sectionStyles, chartStyles];

  @property({ attribute: false }) benchmarks: Benchmark[] = [];

  private _rows: CeilingRow[] = [];

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightBenchmarks');
  }

  protected override willUpdate(): void {
    this._rows = ceilingRows(this.benchmarks ?? []);
  }

  private get _sweeps(): Benchmark[] {
    return withSweeps(this.benchmarks);
  }

  protected override render() {
    if (!this._rows.length) {
      return nothing;
    }
    return html`<section class="jp-GpusightBenchmarks" aria-labelledby="title">
      <h3 id="title">Benchmarks against their ceilings</h3>
      <div class="jp-GpusightBenchmarks-chart"></div>
      <div class="jp-Gpusight-srOnly">
        <table class="jp-Gpusight-table">
          <caption>
            Benchmarks
          </caption>
          <thead>
            <tr>
              <th scope="col">Benchmark</th>
              <th scope="col">Measured</th>
              <th scope="col">Noise band</th>
              <th scope="col">Ceiling</th>
              <th scope="col">Of ceiling</th>
            </tr>
          </thead>
          <tbody>
            ${this._rows.map(
              r =>
                html`<tr>
                  <th scope="row">${r.label}</th>
                  <td>
                    ${r.value === null ? r.skipped : formatValue(r.value, r.unit)}
                  </td>
                  <td>
                    ${
                      r.spread
                        ? `${formatValue(r.spread[0], r.unit)} to ${formatValue(r.spread[1], r.unit)}`
                        : '–'
                    }
                  </td>
                  <td>
                    ${r.ceiling === null ? '–' : formatValue(r.ceiling, r.unit)}
                  </td>
                  <td>
                    ${r.pctOfCeiling === null ? '–' : formatPct(r.pctOfCeiling)}
                  </td>
                </tr>`
            )}
          </tbody>
        </table>
      </div>
      ${
        this._rows.some(r => r.ceilingSource)
          ? html`<details class="jp-GpusightBenchmarks-sources">
              <summary>Where the ceilings come from</summary>
              <ul>
                ${this._rows
                  .filter(r => r.ceilingSource)
                  .map(r => html`<li>${r.label}: ${r.ceilingSource}</li>`)}
              </ul>
            </details>`
          : nothing
      }
      ${this._sweeps.map(
        (b, i) =>
          html`<h4>${b.label}: sweep</h4>
            <div
              class="jp-GpusightBenchmarks-sweep"
              data-index=${i}
              data-id=${b.id}
            ></div>`
      )}
    </section>`;
  }

  protected override readonly chartHostClass = 'jp-GpusightBenchmarks-chart';

  protected drawCharts(width: number): void {
    const host = this.chartHost('jp-GpusightBenchmarks-chart');
    if (!host) {
      return;
    }
    renderCeilings(host, this._rows, {
      width: width,
      color: row => ceilingColor(row.pctOfCeiling),
      ceilingColor: CEILING_MARKER_COLOR
    });
    drawSweeps(
      this.renderRoot,
      'jp-GpusightBenchmarks-sweep',
      this._sweeps,
      width,
      b => ({ title: `${b.label}: sweep`, ...benchmarkAxes(b) })
    );
  }
}

define('gs-benchmarks', GsBenchmarks);

declare global {
  interface HTMLElementTagNameMap {
    'gs-benchmarks': GsBenchmarks;
  }
}
