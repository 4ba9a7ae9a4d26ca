/**
 * `<gs-findings>`: what is wrong, largest impact first, each with its evidence (numbers and the
 * source lines they came from), its impact (measured or estimated, and saying which) and its fix.
 */
import { LitElement, css, html, nothing, unsafeCSS } from 'lit';
import { property } from 'lit/decorators.js';
import { format } from 'd3-format';
import {
  formatMs,
  formatPct,
  formatSeconds,
  formatSpeedup
} from '../charts/format';
import type { Evidence, Finding, Severity } from '../report';
import { define } from './define';
import './fix-card';
import { baseStyles, sectionStyles } from './styles';
import { SEVERITY_COLOR, SEVERITY_LABEL } from './tokens';
import { breakable } from './wrap';

const SEVERITY_RANK: Record<Severity, number> = {
  critical: 0,
  warn: 1,
  info: 2
};

/** Share of the step a finding could recover: the larger of its stated share and its speedup. */
export function impactShare(f: Finding): number {
  const share = f.impact.recoverable_pct ?? 0;
  const speed = f.impact.speedup ?? 1;
  return Math.max(share, speed > 1 ? (1 - 1 / speed) * 100 : 0);
}

/** Findings before every other (report.LEADS): the whole model on the CPU beside a GPU, a
 * debugging switch that slowed every measured step. */
const LEADS = new Set([
  'code.cpu_model',
  'cfg.anomaly_detection',
  'env.launch_blocking'
]);

/**
 * Leads first, then the largest impact, then severity, then id: the order the Python side
 * writes (report.sort_findings). Re-sorted here so a hand-edited report reads the same way.
 */
export const isLead = (f: Finding) => LEADS.has(f.id) && f.severity !== 'info';

export function sortFindings(findings: Finding[]): Finding[] {
  const lead = (f: Finding) => (isLead(f) ? 0 : 1);
  return [...findings].sort(
    (a, b) =>
      lead(a) - lead(b) ||
      impactShare(b) - impactShare(a) ||
      SEVERITY_RANK[a.severity] - SEVERITY_RANK[b.severity] ||
      (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  );
}

const BYTE_UNITS: [number, string][] = [
  [2 ** 40, 'TiB'],
  [2 ** 30, 'GiB'],
  [2 ** 20, 'MiB'],
  [2 ** 10, 'KiB']
];

/** Bytes in the largest binary unit that keeps them >= 1: 1.5 GiB, 512 KiB, 12 B. */
export function formatBytes(bytes: number): string {
  const [div, unit] = BYTE_UNITS.find(([d]) => Math.abs(bytes) >= d) ?? [
    1,
    'B'
  ];
  return `${format('.3~r')(bytes / div)} ${unit}`;
}

/** A unitless number: whole ones grouped (1,585,162), others to 3 significant digits. */
function plainNumber(v: number): string {
  return Number.isInteger(v) ? format(',')(v) : format(',.3~r')(v);
}

/** An evidence value with its unit and a precision that fits it: 202 ms, 2.29×, 1,585,162. */
export function evidenceValue(e: Evidence): string {
  const v = e.value;
  if (v === null) {
    return 'unknown';
  }
  if (typeof v === 'boolean') {
    return v ? 'yes' : 'no';
  }
  const unit = (e.unit ?? '').trim();
  if (typeof v === 'string') {
    return unit ? `${v} ${unit}` : v;
  }
  if (!Number.isFinite(v)) {
    return String(v);
  }
  switch (unit) {
    case 'ms':
      return formatMs(v);
    case 's':
      return formatSeconds(v);
    case 'x':
    case '×':
      return formatSpeedup(v);
    case '%':
      return formatPct(v);
    case 'bytes':
    case 'B':
      return formatBytes(v);
    case '':
      return /speedup/i.test(e.label) ? formatSpeedup(v) : plainNumber(v);
    default:
      return `${plainNumber(v)} ${unit}`;
  }
}

/** One naming style: "6.12x faster" in Python's text reads "6.12× faster" like the charts. */
export function unifyTimes(text: string): string {
  return text.replace(/(\d)x\b/g, '$1×');
}

export function impactText(f: Finding): string {
  const parts: string[] = [];
  const s = f.impact.speedup;
  // A fix measured slower saves nothing: said, never "0.38× faster, saves 0%". Slower as
  // gain_rule.loses says at no noise (Python's gain_text).
  const slower = typeof s === 'number' && s < 1;
  if (typeof s === 'number') {
    const word = s >= 1 ? ' faster' : s * 1.05 <= 1 ? ' (slower)' : '';
    parts.push(`${formatSpeedup(s)}${word}`);
  }
  if (typeof f.impact.recoverable_pct === 'number' && !slower) {
    // A measured change saved that share; an estimate is a ceiling.
    const share = formatPct(f.impact.recoverable_pct);
    parts.push(
      f.impact.basis === 'measured'
        ? `saves ${share} of step time`
        : `up to ${share} of step time`
    );
  }
  return parts.join(', ');
}

/** Styles of `evidenceList`, for every element that shows one. */
export const evidenceStyles = css`
  ul.jp-GpusightFindings-evidence {
    margin: 4px 0;
    padding-left: 18px;
  }
  .jp-GpusightFindings-source {
    display: block;
    margin-top: 2px;
    color: var(--jp-ui-font-color2);
  }
  .jp-GpusightFindings-sourceCode {
    display: block;
    white-space: pre;
    overflow-x: auto;
    padding: 2px 6px;
    background: var(--jp-cell-editor-background);
    border-radius: var(--jp-border-radius);
    color: var(--jp-content-font-color1);
  }
`;

/** A finding's evidence: each value with its unit, and the source line it came from. */
export function evidenceList(f: Finding) {
  return f.evidence.length
    ? html`<ul class="jp-GpusightFindings-evidence" aria-label="Evidence">
        ${f.evidence.map(
          e =>
            html`<li>
              ${breakable(e.label)}: <strong>${evidenceValue(e)}</strong>
              ${
                e.source
                  ? html`<span class="jp-GpusightFindings-source">
                      <code
                        >${breakable(`${e.source.file}:${e.source.line}`)}</code
                      >${
                        typeof e.source.count === 'number'
                          ? ` (${e.source.count}×)`
                          : ''
                      }
                      ${
                        e.source.code
                          ? html`<code class="jp-GpusightFindings-sourceCode"
                              >${breakable(e.source.code)}</code
                            >`
                          : nothing
                      }
                    </span>`
                  : nothing
              }
            </li>`
        )}
      </ul>`
    : nothing;
}

const severityRules = (Object.keys(SEVERITY_COLOR) as Severity[])
  .map(
    s =>
      `.jp-GpusightFindings-item.jp-mod-${s} { border-left-color: ${SEVERITY_COLOR[s]}; }\n` +
      `.jp-GpusightFindings-severity.jp-mod-${s} { color: ${SEVERITY_COLOR[s]}; }`
  )
  .join('\n');

export class GsFindings extends LitElement {
  static override styles = [
    baseStyles,
    sectionStyles,
    evidenceStyles,
    css`
      ol.jp-GpusightFindings-list {
        list-style: none;
        margin: 0;
        padding: 0;
      }
      .jp-GpusightFindings-item {
        border-left: 4px solid var(--jp-border-color1);
        padding: 6px 0 8px 10px;
        margin: 0 0 10px;
      }
      .jp-GpusightFindings-head {
        display: flex;
        gap: 8px;
        align-items: baseline;
        flex-wrap: wrap;
      }
      .jp-GpusightFindings-head h4 {
        margin: 0;
      }
      .jp-GpusightFindings-severity {
        font-weight: 600;
        font-size: max(11px, var(--jp-ui-font-size0));
        text-transform: uppercase;
      }
      .jp-GpusightFindings-id {
        color: var(--jp-ui-font-color2);
        font-size: max(11px, var(--jp-ui-font-size0));
      }
      .jp-GpusightFindings-detail,
      .jp-GpusightFindings-impact {
        margin: 4px 0;
      }
      .jp-GpusightFindings-basis {
        font-size: max(11px, var(--jp-ui-font-size0));
        border: var(--jp-border-width) solid var(--jp-border-color1);
        border-radius: var(--jp-border-radius);
        padding: 0 4px;
        margin-right: 4px;
      }
      .jp-GpusightFindings-basis.jp-mod-measured {
        border-color: var(--jp-success-color1);
        color: var(--jp-success-color1);
      }
    `,
    // Severity colors from tokens.ts: constants, never report data.
    unsafeCSS(severityRules)
  ];

  @property({ attribute: false }) findings: Finding[] = [];
  /** Passed to each fix card: the host handles `gs-insert-cell`. */
  @property({ type: Boolean }) insertable = false;
  /** The finding shown on top (`<gs-first-fix>`): left out here. */
  @property({ attribute: false }) exclude: string | null = null;

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightFindings');
  }

  protected override render() {
    const all = sortFindings(this.findings ?? []);
    const findings = all.filter(f => f.id !== this.exclude);
    if (!findings.length && all.length) {
      return nothing; // the only finding is the one on top
    }
    return html`<section class="jp-GpusightFindings" aria-labelledby="title">
      <h3 id="title">
        ${all.length > findings.length ? 'Other findings' : 'Findings'}
      </h3>
      ${
        findings.length
          ? html`<ol class="jp-GpusightFindings-list">
              ${findings.map(f => this._finding(f))}
            </ol>`
          : html`<p class="jp-Gpusight-muted">Nothing to fix was found.</p>`
      }
    </section>`;
  }

  private _finding(f: Finding) {
    const numbers = impactText(f);
    return html`<li
      class="jp-GpusightFindings-item jp-mod-${f.severity}"
      data-id=${f.id}
    >
      <div class="jp-GpusightFindings-head">
        <span class="jp-GpusightFindings-severity jp-mod-${f.severity}"
          >${SEVERITY_LABEL[f.severity]}</span
        >
        <h4 class="jp-GpusightFindings-title">
          ${breakable(unifyTimes(f.title))}
        </h4>
        <code class="jp-GpusightFindings-id">${f.id}</code>
      </div>
      ${f.detail ? html`<p class="jp-GpusightFindings-detail">${unifyTimes(f.detail)}</p>` : nothing}
      <p class="jp-GpusightFindings-impact">
        ${
          f.impact.basis === 'none'
            ? nothing
            : html`<span
                class="jp-GpusightFindings-basis jp-mod-${f.impact.basis}"
                >${f.impact.basis}</span
              >`
        }
        ${numbers ? html`<strong>${numbers}.</strong> ` : nothing}${unifyTimes(f.impact.text)}
      </p>
      ${evidenceList(f)}
      <gs-fix-card
        .fix=${f.fix}
        finding-id=${f.id}
        ?insertable=${this.insertable}
      ></gs-fix-card>
    </li>`;
  }
}

define('gs-findings', GsFindings);

declare global {
  interface HTMLElementTagNameMap {
    'gs-findings': GsFindings;
  }
}
