/**
 * `<gs-compare>`: two reports, before and after a change. The step time and its speedup first,
 * then each side's verdict and step-time breakdown drawn by the same elements as `<gs-report>`,
 * the breakdown as a table of both, and which findings were resolved, are new, or are still there.
 * Both reports are validated first; one that fails is shown as a `<gs-error>` naming the field.
 */
import { LitElement, css, html, nothing } from 'lit';
import { property } from 'lit/decorators.js';
import { BREAKDOWN_LABELS } from '../charts/breakdown';
import { formatMs, formatPct, formatSpeedup } from '../charts/format';
import {
  validateReport,
  type GpusightReport,
  type ReportValidation
} from '../report';
import {
  compareReports,
  type Comparison,
  type FindingChange,
  type FindingStatus
} from '../report/compare';
import './breakdown';
import { define } from './define';
import { cpuOnlyBuild, gpuInUse } from './machine';
import { humanDate } from './not-run';
import './error';
import { baseStyles, sectionStyles } from './styles';
import { BOTTLENECK_LABEL, SEVERITY_LABEL } from './tokens';
import './verdict';

const STATUS_LABEL: Record<FindingStatus, string> = {
  resolved: 'Resolved',
  new: 'New',
  still: 'Still there'
};

/** "1.85× faster", "1.20× slower", or "no change" within half a percent. */
export function speedupText(speedup: number | null): string {
  if (speedup === null || !Number.isFinite(speedup)) {
    return '';
  }
  if (Math.abs(speedup - 1) < 0.005) {
    return 'no change';
  }
  return speedup > 1
    ? `${formatSpeedup(speedup)} faster`
    : `${formatSpeedup(1 / speedup)} slower`;
}

function msOrDash(ms: number | null): string {
  return ms === null ? '–' : formatMs(ms);
}

function pctOrDash(pct: number | null): string {
  return pct === null ? '–' : formatPct(pct);
}

function signedMs(ms: number | null): string {
  if (ms === null) {
    return '–';
  }
  return ms > 0 ? `+${formatMs(ms)}` : formatMs(ms);
}

function bottleneckLabel(b: string): string {
  return BOTTLENECK_LABEL[b as keyof typeof BOTTLENECK_LABEL] ?? b;
}

export class GsCompare extends LitElement {
  static override styles = [
    baseStyles,
    sectionStyles,
    css`
      :host {
        margin: 0;
      }
      .jp-GpusightCompare {
        display: flex;
        flex-direction: column;
        gap: 12px;
      }
      .jp-GpusightCompare-headline {
        font-size: var(--jp-ui-font-size3);
        font-weight: 600;
        color: var(--jp-ui-font-color0);
        margin: 0;
      }
      .jp-GpusightCompare-sides {
        display: grid;
        grid-template-columns: repeat(auto-fit, minmax(300px, 1fr));
        gap: 12px;
      }
      .jp-GpusightCompare-side {
        display: flex;
        flex-direction: column;
        gap: 8px;
        min-width: 0;
      }
      .jp-GpusightCompare-side h3 {
        margin: 0;
      }
      .jp-GpusightCompare-meta {
        color: var(--jp-ui-font-color2);
        margin: 0;
        overflow-wrap: anywhere;
      }
      td.jp-GpusightCompare-num,
      th.jp-GpusightCompare-num {
        text-align: right;
        font-variant-numeric: tabular-nums;
      }
      .jp-GpusightCompare-status {
        font-weight: 600;
        white-space: nowrap;
      }
      .jp-GpusightCompare-status.jp-mod-resolved {
        color: var(--jp-success-color1);
      }
      .jp-GpusightCompare-status.jp-mod-new {
        color: var(--jp-error-color1);
      }
      .jp-GpusightCompare-status.jp-mod-still {
        color: var(--jp-warn-color1);
      }
      section + section {
        margin-top: 0;
      }
    `
  ];

  /**
   * The report before the change: anything, validated before drawing. (Not `before`/`after`:
   * those are DOM methods every element has.)
   */
  @property({ attribute: false }) reportBefore: unknown = null;
  /** The report after the change. */
  @property({ attribute: false }) reportAfter: unknown = null;

  private _before: ReportValidation | null = null;
  private _after: ReportValidation | null = null;
  private _comparison: Comparison | null = null;

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightCompare');
  }

  protected override willUpdate(changed: Map<PropertyKey, unknown>): void {
    if (changed.has('reportBefore')) {
      this._before =
        this.reportBefore == null ? null : validateReport(this.reportBefore);
    }
    if (changed.has('reportAfter')) {
      this._after =
        this.reportAfter == null ? null : validateReport(this.reportAfter);
    }
    this._comparison =
      this._before?.ok && this._after?.ok
        ? compareReports(this._before.report, this._after.report)
        : null;
  }

  /** The comparison drawn (null until both reports are valid). */
  get comparison(): Comparison | null {
    return this._comparison;
  }

  protected override render() {
    const errors = [
      ['before', this._before],
      ['after', this._after]
    ] as const;
    const failed = errors.filter(([, r]) => r && !r.ok);
    if (failed.length) {
      return html`${failed.map(([side, r]) =>
        r && !r.ok
          ? html`<gs-error
              .heading=${`The "${side}" report cannot be shown`}
              .path=${r.path}
              .message=${r.error}
              .hint=${'Compare two reports written by gpusight (gpusight diff before.json after.json).'}
            ></gs-error>`
          : nothing
      )}`;
    }
    const c = this._comparison;
    if (!c || !this._before?.ok || !this._after?.ok) {
      return nothing;
    }
    const before = this._before.report;
    const after = this._after.report;
    const speed = speedupText(c.speedup);
    return html`<article
      class="jp-GpusightCompare"
      aria-label="gpusight comparison"
    >
      <header>
        <h2>gpusight: before and after</h2>
        ${
          speed
            ? html`<p class="jp-GpusightCompare-headline">
                ${msOrDash(c.stepBeforeMs)} → ${msOrDash(c.stepAfterMs)} per
                step: ${speed}
              </p>`
            : html`<p class="jp-Gpusight-muted">
                No step time to compare: one of the reports has no run.
              </p>`
        }
      </header>
      ${this._summary(c)}
      <div class="jp-GpusightCompare-sides">
        ${this._side('Before', before)} ${this._side('After', after)}
      </div>
      ${this._breakdown(c)} ${this._findings(c.findings)}
    </article>`;
  }

  private _side(label: string, r: GpusightReport) {
    return html`<div class="jp-GpusightCompare-side" aria-label=${label}>
      <h3>${label}</h3>
      <p class="jp-GpusightCompare-meta">
        ${r.title ?? r.kind} ·
        <time datetime=${r.created_at} title=${r.created_at}
          >${humanDate(r.created_at)}</time
        >
      </p>
      <gs-verdict
        .verdict=${r.verdict}
        .gpu=${gpuInUse(r)}
        .cpuOnly=${cpuOnlyBuild(r)}
      ></gs-verdict>
      ${
        r.run
          ? html`<gs-breakdown
              .run=${r.run}
              .gpu=${gpuInUse(r)}
            ></gs-breakdown>`
          : nothing
      }
    </div>`;
  }

  private _summary(c: Comparison) {
    const rows: [string, string, string, string][] = [
      [
        'Step time',
        msOrDash(c.stepBeforeMs),
        msOrDash(c.stepAfterMs),
        speedupText(c.speedup)
      ],
      [
        'GPU busy',
        pctOrDash(c.busyBeforePct),
        pctOrDash(c.busyAfterPct),
        c.busyBeforePct !== null && c.busyAfterPct !== null
          ? `${c.busyAfterPct - c.busyBeforePct >= 0 ? '+' : ''}${(c.busyAfterPct - c.busyBeforePct).toFixed(1)} points`
          : ''
      ],
      [
        'Bottleneck',
        bottleneckLabel(c.bottleneckBefore),
        bottleneckLabel(c.bottleneckAfter),
        c.bottleneckBefore === c.bottleneckAfter ? 'same' : 'changed'
      ]
    ];
    return html`<section aria-label="Summary">
      <table class="jp-Gpusight-table jp-GpusightCompare-summary">
        <thead>
          <tr>
            <th scope="col"></th>
            <th scope="col" class="jp-GpusightCompare-num">Before</th>
            <th scope="col" class="jp-GpusightCompare-num">After</th>
            <th scope="col">Change</th>
          </tr>
        </thead>
        <tbody>
          ${rows.map(
            ([label, b, a, d]) =>
              html`<tr>
                <th scope="row">${label}</th>
                <td class="jp-GpusightCompare-num">${b}</td>
                <td class="jp-GpusightCompare-num">${a}</td>
                <td>${d}</td>
              </tr>`
          )}
        </tbody>
      </table>
    </section>`;
  }

  private _breakdown(c: Comparison) {
    if (!c.breakdown.length) {
      return nothing;
    }
    return html`<section aria-labelledby="breakdown-title">
      <h3 id="breakdown-title">Step-time breakdown, per step</h3>
      <table class="jp-Gpusight-table jp-GpusightCompare-breakdown">
        <thead>
          <tr>
            <th scope="col">Category</th>
            <th scope="col" class="jp-GpusightCompare-num">Before</th>
            <th scope="col" class="jp-GpusightCompare-num">After</th>
            <th scope="col" class="jp-GpusightCompare-num">Change</th>
          </tr>
        </thead>
        <tbody>
          ${c.breakdown.map(
            row =>
              html`<tr>
                <th scope="row">${BREAKDOWN_LABELS[row.key]}</th>
                <td class="jp-GpusightCompare-num">
                  ${msOrDash(row.beforeMs)}
                </td>
                <td class="jp-GpusightCompare-num">${msOrDash(row.afterMs)}</td>
                <td class="jp-GpusightCompare-num">${signedMs(row.deltaMs)}</td>
              </tr>`
          )}
        </tbody>
      </table>
    </section>`;
  }

  private _findings(changes: FindingChange[]) {
    return html`<section aria-labelledby="findings-title">
      <h3 id="findings-title">Findings</h3>
      ${
        changes.length
          ? html`<table class="jp-Gpusight-table jp-GpusightCompare-findings">
              <thead>
                <tr>
                  <th scope="col">Status</th>
                  <th scope="col">Finding</th>
                  <th scope="col">Severity</th>
                </tr>
              </thead>
              <tbody>
                ${changes.map(
                  f =>
                    html`<tr data-finding=${f.key}>
                      <td class="jp-GpusightCompare-status jp-mod-${f.status}">
                        ${STATUS_LABEL[f.status]}
                      </td>
                      <td>
                        <span class="jp-GpusightCompare-title">${f.title}</span>
                        <code class="jp-Gpusight-muted">${f.key}</code>
                      </td>
                      <td>${severityChange(f)}</td>
                    </tr>`
                )}
              </tbody>
            </table>`
          : html`<p class="jp-Gpusight-muted">Neither report has findings.</p>`
      }
    </section>`;
  }
}

function severityChange(f: FindingChange): string {
  const b = f.severityBefore ? SEVERITY_LABEL[f.severityBefore] : null;
  const a = f.severityAfter ? SEVERITY_LABEL[f.severityAfter] : null;
  if (b && a && b !== a) {
    return `${b} → ${a}`;
  }
  return (a ?? b) as string;
}

define('gs-compare', GsCompare);

declare global {
  interface HTMLElementTagNameMap {
    'gs-compare': GsCompare;
  }
}
