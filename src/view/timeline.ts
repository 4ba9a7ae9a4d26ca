/**
 * `<gs-timeline>`: GPU (and host CPU) utilisation over the run, with step boundaries. Zoom with
 * the buttons, the keyboard (+, -, 0, arrows on the focused chart), Ctrl/⌘+wheel, or drag to pan.
 */
import { css, html, nothing } from 'lit';
import { property, state } from 'lit/decorators.js';
import { styleMap } from 'lit/directives/style-map.js';
import { formatPct, formatSecondsAt } from '../charts/format';
import {
  renderTimeline,
  summariseSeries,
  timelineSeries,
  type SeriesSummary,
  type TimelineController,
  type TimelineData,
  type TimelineView
} from '../charts/timeline';
import type { Run } from '../report';
import { ChartElement } from './chart-element';
import { define } from './define';
import { baseStyles, sectionStyles } from './styles';
import { SIZE, seriesColor } from './tokens';

/** A summary figure, or a dash where the series had no sample (never "NaN%"). */
function pct(v: number): string {
  return Number.isFinite(v) ? formatPct(v) : '–';
}

export class GsTimeline extends ChartElement {
  static override styles = [
    baseStyles,
    sectionStyles,
    css`
      .jp-GpusightTimeline-toolbar {
        display: flex;
        gap: 6px;
        align-items: center;
        flex-wrap: wrap;
        margin-bottom: 4px;
      }
      .jp-GpusightTimeline-window {
        margin-left: auto;
        color: var(--jp-ui-font-color2);
      }
      .jp-GpusightTimeline-legend {
        display: flex;
        gap: 12px;
        flex-wrap: wrap;
        margin: 0;
        padding: 0;
        list-style: none;
      }
      .jp-GpusightTimeline-swatch {
        display: inline-block;
        width: 14px;
        height: 3px;
        vertical-align: middle;
        margin-right: 4px;
      }
      .jp-GpusightTimelineChart-line {
        stroke-width: 1.25px;
        vector-effect: non-scaling-stroke;
      }
      /* Decimated: the min/max trace is a faint band; the mean line carries the reading. */
      .jp-GpusightTimelineChart-line.jp-mod-decimated {
        stroke-opacity: 0.3;
      }
      .jp-GpusightTimelineChart-mean {
        stroke-width: 2px;
      }
      .jp-GpusightTimelineChart-line.jp-mod-cpu,
      .jp-GpusightTimelineChart-mean.jp-mod-cpu {
        stroke-dasharray: 3 2;
      }
      .jp-GpusightTimelineChart-steps {
        stroke: var(--jp-ui-font-color3);
        stroke-dasharray: 2 3;
        stroke-width: 1px;
        fill: none;
      }
      .jp-GpusightTimeline-note {
        margin: 0 0 2px;
        font-size: max(11px, var(--jp-ui-font-size0));
      }
      .jp-GpusightTimelineChart-surface {
        cursor: grab;
      }
      .jp-GpusightChart text.jp-GpusightTimelineChart-hint {
        fill: var(--jp-ui-font-color2);
      }
    `
  ];

  @property({ attribute: false }) run: Run | null = null;
  /** The machine's `cpu_count`: the host CPU line is a share of its cores. */
  @property({ attribute: false }) cpuCount: number | null = null;

  @state() private _view: TimelineView | null = null;

  private _data: TimelineData = { series: [], stepStarts: [] };
  private _summaries: SeriesSummary[] = [];
  private _controller: TimelineController | null = null;
  private _drawn: { data: TimelineData; width: number } | null = null;

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightTimeline');
  }

  protected override willUpdate(changed: Map<PropertyKey, unknown>): void {
    if (changed.has('run') || changed.has('cpuCount')) {
      const samples = this.run?.timeline ?? [];
      this._data = {
        series: timelineSeries(samples, this.cpuCount),
        stepStarts: [...(this.run?.step_starts_s ?? [])].sort((a, b) => a - b)
      };
      this._summaries = this._data.series.map(summariseSeries);
    }
  }

  protected override render() {
    if (!this._data.series.length) {
      return nothing;
    }
    const v = this._view;
    return html`<section class="jp-GpusightTimeline" aria-labelledby="title">
      <h3 id="title">Utilisation timeline</h3>
      <div class="jp-GpusightTimeline-toolbar">
        <ul class="jp-GpusightTimeline-legend">
          ${this._data.series.map(
            s =>
              html`<li>
                <span
                  class="jp-GpusightTimeline-swatch"
                  style=${styleMap({ background: seriesColor(s.key) })}
                  aria-hidden="true"
                ></span
                >${s.label}
              </li>`
          )}
          ${this._data.stepStarts.length ? html`<li>│ step start</li>` : nothing}
        </ul>
        <button
          class="jp-GpusightTimeline-zoomIn"
          aria-label="Zoom in"
          @click=${() => this._zoom(2)}
        >
          +
        </button>
        <button
          class="jp-GpusightTimeline-zoomOut"
          aria-label="Zoom out"
          @click=${() => this._zoom(0.5)}
        >
          −
        </button>
        <button
          class="jp-GpusightTimeline-reset"
          @click=${() => this._controller?.reset()}
        >
          Reset
        </button>
        <span class="jp-GpusightTimeline-window" aria-live="polite">
          ${
            v
              ? `${formatSecondsAt(v.t0, v.tickStep / 10)} – ${formatSecondsAt(v.t1, v.tickStep / 10)}`
              : ''
          }
        </span>
      </div>
      ${
        v?.decimated
          ? html`<p class="jp-Gpusight-muted jp-GpusightTimeline-note">
              More samples than pixels: the faint band is each pixel's range,
              the line its mean.
            </p>`
          : nothing
      }
      <div
        class="jp-GpusightTimeline-chart jp-GpusightChart-host"
        tabindex="0"
        role="group"
        aria-label="Utilisation timeline: + and - zoom, arrow keys pan, 0 resets"
        @keydown=${this._onKey}
      ></div>
      <div class="jp-Gpusight-srOnly">
        <table class="jp-Gpusight-table">
          <caption>
            Utilisation summary
          </caption>
          <thead>
            <tr>
              <th scope="col">Series</th>
              <th scope="col">Samples</th>
              <th scope="col">Mean</th>
              <th scope="col">Min</th>
              <th scope="col">Max</th>
              <th scope="col">Below 10%</th>
            </tr>
          </thead>
          <tbody>
            ${this._summaries.map(
              s =>
                html`<tr>
                  <th scope="row">${s.label}</th>
                  <td>${s.samples}</td>
                  <td>${pct(s.mean)}</td>
                  <td>${pct(s.min)}</td>
                  <td>${pct(s.max)}</td>
                  <td>${pct(s.idlePct)} of samples</td>
                </tr>`
            )}
          </tbody>
        </table>
      </div>
    </section>`;
  }

  private _zoom(factor: number): void {
    this._controller?.zoomBy(factor);
  }

  private _onKey = (e: KeyboardEvent): void => {
    const c = this._controller;
    if (!c) {
      return;
    }
    const actions: Record<string, () => void> = {
      '+': () => c.zoomBy(2),
      '=': () => c.zoomBy(2),
      '-': () => c.zoomBy(0.5),
      '0': () => c.reset(),
      ArrowLeft: () => c.panBy(-0.2),
      ArrowRight: () => c.panBy(0.2)
    };
    const action = actions[e.key];
    if (action) {
      e.preventDefault();
      action();
    }
  };

  protected override readonly chartHostClass = 'jp-GpusightTimeline-chart';

  protected drawCharts(width: number): void {
    const host = this.chartHost('jp-GpusightTimeline-chart');
    if (!host) {
      return;
    }
    // Only the window label changed: keep the chart (and its zoom) as it is.
    if (
      this._drawn &&
      this._drawn.data === this._data &&
      this._drawn.width === width
    ) {
      return;
    }
    this._drawn = { data: this._data, width };
    this._controller = renderTimeline(host, this._data, {
      width,
      height: SIZE.chartHeight,
      color: seriesColor,
      onView: view => {
        this._view = view;
      }
    });
  }

  /** The chart's controller, for hosts and tests that drive the zoom. */
  get controller(): TimelineController | null {
    return this._controller;
  }
}

define('gs-timeline', GsTimeline);

declare global {
  interface HTMLElementTagNameMap {
    'gs-timeline': GsTimeline;
  }
}
