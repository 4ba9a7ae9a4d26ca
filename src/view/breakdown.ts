/** `<gs-breakdown>`: where one step's time goes, plus the host syncs found with their source lines. */
import { css, html, nothing } from 'lit';
import { property } from 'lit/decorators.js';
import {
  breakdownSegments,
  renderBreakdown,
  type BreakdownSegment
} from '../charts/breakdown';
import { formatMs, formatPct } from '../charts/format';
import {
  drawnCaption,
  phaseCaption,
  readPhases,
  readStall,
  renderSteps,
  stallCaption,
  type StepPhase,
  type StepStall
} from '../charts/steps';
import type { Run } from '../report';
import { chartWidth } from '../charts/frame';
import { ChartElement } from './chart-element';
import { define } from './define';
import { baseStyles, sectionStyles } from './styles';
import { CATEGORY_COLOR, STALL_COLOR, STEP_COLOR } from './tokens';
import { breakable } from './wrap';

export class GsBreakdown extends ChartElement {
  static override styles = [
    baseStyles,
    sectionStyles,
    css`
      .jp-GpusightBreakdownChart-rect {
        stroke: var(--jp-layout-color1);
        stroke-width: 1px;
      }
      .jp-GpusightStepsChart-median {
        stroke: var(--jp-ui-font-color1);
        stroke-dasharray: 4 3;
        fill: none;
      }
      .jp-GpusightBreakdown-stall {
        margin: 0 0 4px;
        color: var(--jp-ui-font-color0);
        font-weight: 600;
      }
      .jp-GpusightChart text.jp-GpusightBreakdownChart-inside {
        fill: var(--jp-ui-inverse-font-color0);
        font-weight: 600;
      }
    `
  ];

  @property({ attribute: false }) run: Run | null = null;
  /** The run could use a GPU: false labels compute as the CPU's. */
  @property({ type: Boolean }) gpu = true;

  private _segments: BreakdownSegment[] = [];
  private _steps: number[] = [];
  private _stall: StepStall | null = null;
  private _phases: StepPhase[] = [];

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightBreakdown');
  }

  protected override willUpdate(): void {
    const run = this.run;
    this._segments = run?.breakdown_ms
      ? breakdownSegments(run.breakdown_ms, run.step_time_ms, this.gpu)
      : [];
    this._steps = (run?.step_times_ms ?? []).filter(t => Number.isFinite(t));
    this._stall = readStall(run);
    this._phases = readPhases(run);
  }

  /** Whether the card has anything beyond one number: otherwise it is left out. */
  get hasContent(): boolean {
    return (
      this._segments.length > 0 ||
      this._steps.length > 1 ||
      (this.run?.syncs?.length ?? 0) > 0
    );
  }

  protected override render() {
    const run = this.run;
    if (!run || !this.hasContent) {
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
        mean of ${run.steps} steps, stalls
        included${
          run.step_time_median_ms !== undefined
            ? html` (median step ${formatMs(run.step_time_median_ms)})`
            : nothing
        }${run.label ? html`, of <code>${run.label}</code>` : nothing}.
      </p>
      ${
        this._segments.length
          ? html`<div class="jp-GpusightBreakdown-chart"></div>
              <div class="jp-Gpusight-srOnly">
                <table class="jp-Gpusight-table">
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
                </table>
              </div>`
          : nothing
      }
      ${this._steps.length > 1 ? this._stepStrip() : nothing}
      ${run.syncs?.length ? this._syncs(run) : nothing}
    </section>`;
  }

  private _stepStrip() {
    const stall = this._stall;
    const drawn = drawnCaption(this._steps.length, this.run?.steps);
    return html`<h4>Each step</h4>
      ${
        drawn
          ? html`<p class="jp-Gpusight-muted jp-GpusightBreakdown-drawn">
              ${drawn}
            </p>`
          : nothing
      }
      ${
        stall
          ? html`<p class="jp-GpusightBreakdown-stall">
              ${stallCaption(stall)}
            </p>`
          : nothing
      }
      ${this._phases.map(
        p =>
          html`<p class="jp-GpusightBreakdown-stall jp-mod-phase">
            ${phaseCaption(p)}
          </p>`
      )}
      <div class="jp-GpusightBreakdown-steps"></div>`;
  }

  private _syncs(run: Run) {
    return html`<h4>Host-device syncs</h4>
      <table class="jp-Gpusight-table jp-mod-stack jp-GpusightBreakdown-syncs">
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
                <td data-label="Count">${s.count}</td>
                <td data-label="Time">
                  ${typeof s.total_ms === 'number' ? formatMs(s.total_ms) : '–'}
                </td>
                <td data-label="Where">
                  ${
                    s.source
                      ? html`<code
                            >${breakable(`${s.source.file}:${s.source.line}`)}</code
                          >${
                            s.source.code
                              ? html`<br /><code
                                    >${breakable(s.source.code)}</code
                                  >`
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

  override measureChartWidth(): number {
    // Without a breakdown the step strip is the first chart: measure it instead.
    const host =
      this.chartHost('jp-GpusightBreakdown-chart') ??
      this.chartHost('jp-GpusightBreakdown-steps');
    return host ? chartWidth(host.clientWidth) : 0;
  }

  override drawChartsAt(width: number): void {
    const host = this.chartHost('jp-GpusightBreakdown-chart');
    if (host) {
      this.drawCharts(width);
    }
    const steps = this.chartHost('jp-GpusightBreakdown-steps');
    if (steps) {
      renderSteps(steps, this._steps, {
        width,
        color: STEP_COLOR,
        stallColor: STALL_COLOR,
        stall: this._stall,
        phaseColor: CATEGORY_COLOR.between_steps,
        phases: this._phases,
        totalSteps: this.run?.steps
      });
    }
  }
}

define('gs-breakdown', GsBreakdown);

declare global {
  interface HTMLElementTagNameMap {
    'gs-breakdown': GsBreakdown;
  }
}
