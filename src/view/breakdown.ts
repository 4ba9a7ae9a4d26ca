/** `<gs-breakdown>`: where one step's time goes, plus the host syncs found with their source lines. */
import { css, html, nothing } from 'lit';
import { property } from 'lit/decorators.js';
import {
  breakdownSegments,
  renderBreakdown,
  type BreakdownSegment
} from '../charts/breakdown';
import { formatMs, formatPct } from '../charts/format';
import type { Run } from '../report';
import { ChartElement } from './chart-element';
import { define } from './define';
import { baseStyles, sectionStyles } from './styles';
import { CATEGORY_COLOR } from './tokens';

export class GsBreakdown extends ChartElement {
  static override styles = [
    baseStyles,
    sectionStyles,
    css`
      .jp-GpusightBreakdownChart-rect {
        stroke: var(--jp-layout-color1);
        stroke-width: 1px;
      }
      .jp-GpusightChart text.jp-GpusightBreakdownChart-inside {
        fill: var(--jp-ui-inverse-font-color0);
        font-weight: 600;
      }
    `
  ];

  @property({ attribute: false }) run: Run | null = null;

  private _segments: BreakdownSegment[] = [];

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightBreakdown');
  }

  protected override willUpdate(): void {
    const run = this.run;
    this._segments = run?.breakdown_ms
      ? breakdownSegments(run.breakdown_ms, run.step_time_ms)
      : [];
  }

  protected override render() {
    const run = this.run;
    if (!run) {
      return nothing;
    }
    const spread = run.step_time_spread_ms;
    return html`<section class="jp-GpusightBreakdown" aria-labelledby="title">
      <h3 id="title">Step time</h3>
      <p>
        <strong>${formatMs(run.step_time_ms)}</strong> per
        step${
          spread
            ? html` <span class="jp-Gpusight-muted"
                >(${formatMs(spread[0])} to ${formatMs(spread[1])})</span
              >`
            : nothing
        },
        median of ${run.steps}
        steps${run.label ? html` of <code>${run.label}</code>` : nothing}.
      </p>
      ${
        this._segments.length
          ? html`<div class="jp-GpusightBreakdown-chart"></div>
              <table class="jp-Gpusight-table jp-Gpusight-srOnly">
                <caption>
                  Step-time breakdown
                </caption>
                <thead>
                  <tr>
                    <th scope="col">Category</th>
                    <th scope="col">ms per step</th>
                    <th scope="col">Share</th>
                  </tr>
                </thead>
                <tbody>
                  ${this._segments.map(
                    s =>
                      html`<tr>
                        <th scope="row">${s.label}</th>
                        <td>${formatMs(s.ms)}</td>
                        <td>${formatPct(s.pct)}</td>
                      </tr>`
                  )}
                </tbody>
              </table>`
          : html`<p class="jp-Gpusight-muted">
              No breakdown was measured for this run.
            </p>`
      }
      ${run.syncs?.length ? this._syncs(run) : nothing}
    </section>`;
  }

  private _syncs(run: Run) {
    return html`<h4>Host-device syncs</h4>
      <table class="jp-Gpusight-table jp-GpusightBreakdown-syncs">
        <thead>
          <tr>
            <th scope="col">Kind</th>
            <th scope="col">Count</th>
            <th scope="col">Time</th>
            <th scope="col">Where</th>
          </tr>
        </thead>
        <tbody>
          ${(run.syncs ?? []).map(
            s =>
              html`<tr>
                <th scope="row">${s.kind}</th>
                <td>${s.count}</td>
                <td>
                  ${typeof s.total_ms === 'number' ? formatMs(s.total_ms) : '–'}
                </td>
                <td>
                  ${
                    s.source
                      ? html`<code>${s.source.file}:${s.source.line}</code>${
                            s.source.code
                              ? html`<br /><code>${s.source.code}</code>`
                              : nothing
                          }`
                      : '–'
                  }
                </td>
              </tr>`
          )}
        </tbody>
      </table>`;
  }

  protected override readonly chartHostClass = 'jp-GpusightBreakdown-chart';

  protected drawCharts(width: number): void {
    const host = this.chartHost('jp-GpusightBreakdown-chart');
    if (!host) {
      return;
    }
    renderBreakdown(host, this._segments, {
      width: width,
      color: key => CATEGORY_COLOR[key]
    });
  }
}

define('gs-breakdown', GsBreakdown);

declare global {
  interface HTMLElementTagNameMap {
    'gs-breakdown': GsBreakdown;
  }
}
