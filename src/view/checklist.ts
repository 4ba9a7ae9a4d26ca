/** `<gs-checklist>`: the environment checklist: pass / warn / fail / info / not checked, with values. */
import { LitElement, css, html, nothing, unsafeCSS } from 'lit';
import { property } from 'lit/decorators.js';
import type { Check } from '../report';
import { define } from './define';
import { baseStyles, sectionStyles } from './styles';
import {
  CHECK_COLOR,
  CHECK_LABEL,
  CHECK_SYMBOL,
  type CheckStatus
} from './tokens';
import { breakable } from './wrap';

const STATUS_ORDER: CheckStatus[] = [
  'fail',
  'warn',
  'pass',
  'info',
  'not_checked'
];

const statusRules = STATUS_ORDER.map(
  s => `.jp-GpusightChecklist-status.jp-mod-${s} { color: ${CHECK_COLOR[s]}; }`
).join('\n');

/** "1 fail, 1 warning, 3 pass": counts in order of urgency. */
export function checklistSummary(checks: Check[]): string {
  return STATUS_ORDER.map(
    s => [s, checks.filter(c => c.status === s).length] as const
  )
    .filter(([, n]) => n > 0)
    .map(([s, n]) => `${n} ${CHECK_LABEL[s]}`)
    .join(', ');
}

export class GsChecklist extends LitElement {
  static override styles = [
    baseStyles,
    sectionStyles,
    css`
      :host {
        container-type: inline-size;
      }
      /* Narrow (the sidebar): each check a block of its own, status and name over the value. */
      @container (max-width: 420px) {
        .jp-Gpusight-table thead {
          display: none;
        }
        .jp-Gpusight-table tr {
          display: grid;
          grid-template-columns: auto minmax(0, 1fr);
          gap: 0 8px;
          padding: 4px 0;
          border-bottom: var(--jp-border-width) solid var(--jp-border-color2);
        }
        .jp-Gpusight-table td,
        .jp-Gpusight-table th {
          border-bottom: none;
          padding: 0;
        }
        .jp-Gpusight-table tr > td:last-child {
          grid-column: 1 / -1;
        }
      }
      .jp-GpusightChecklist-status {
        white-space: nowrap;
        font-weight: 600;
      }
      .jp-GpusightChecklist-symbol {
        display: inline-block;
        width: 1.2em;
        text-align: center;
      }
      .jp-GpusightChecklist-detail {
        color: var(--jp-ui-font-color2);
      }
    `,
    // Status colors from tokens.ts: constants, never report data.
    unsafeCSS(statusRules)
  ];

  @property({ attribute: false }) checks: Check[] = [];

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightChecklist');
  }

  protected override render() {
    const checks = this.checks ?? [];
    return html`<section class="jp-GpusightChecklist" aria-labelledby="title">
      <h3 id="title">Environment checklist</h3>
      <p class="jp-Gpusight-muted">
        ${checks.length ? checklistSummary(checks) : 'No checks.'}
      </p>
      ${
        checks.length
          ? html`<table class="jp-Gpusight-table">
              <thead>
                <tr>
                  <th scope="col">Status</th>
                  <th scope="col">Check</th>
                  <th scope="col">Value</th>
                </tr>
              </thead>
              <tbody>
                ${checks.map(
                  c =>
                    html`<tr class="jp-GpusightChecklist-row" data-id=${c.id}>
                      <td
                        class="jp-GpusightChecklist-status jp-mod-${c.status}"
                      >
                        <span
                          class="jp-GpusightChecklist-symbol"
                          aria-hidden="true"
                          >${CHECK_SYMBOL[c.status]}</span
                        >
                        ${CHECK_LABEL[c.status]}
                      </td>
                      <th scope="row">${breakable(c.label)}</th>
                      <td>
                        <code>${breakable(c.value)}</code>
                        ${
                          c.detail
                            ? html`<div class="jp-GpusightChecklist-detail">
                                ${c.detail}
                              </div>`
                            : nothing
                        }
                      </td>
                    </tr>`
                )}
              </tbody>
            </table>`
          : nothing
      }
    </section>`;
  }
}

define('gs-checklist', GsChecklist);

declare global {
  interface HTMLElementTagNameMap {
    'gs-checklist': GsChecklist;
  }
}
