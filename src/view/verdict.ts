/** `<gs-verdict>`: the answer first: the bottleneck, how busy the GPU was, and one sentence. */
import { LitElement, css, html, nothing } from 'lit';
import { property } from 'lit/decorators.js';
import { styleMap } from 'lit/directives/style-map.js';
import { formatPct } from '../charts/format';
import type { Verdict } from '../report';
import { define } from './define';
import { baseStyles } from './styles';
import { BOTTLENECK_LABEL } from './tokens';

export class GsVerdict extends LitElement {
  static override styles = [
    baseStyles,
    css`
      .jp-GpusightVerdict {
        display: grid;
        grid-template-columns: 1fr auto;
        gap: 4px 16px;
        align-items: center;
        padding: 10px 12px;
        border-radius: var(--jp-border-radius);
        background: var(--jp-layout-color2);
        border-left: 4px solid var(--jp-brand-color1);
      }
      .jp-GpusightVerdict.jp-mod-none {
        border-left-color: var(--jp-success-color1);
      }
      .jp-GpusightVerdict-bottleneck {
        font-size: var(--jp-ui-font-size3);
        font-weight: 600;
        color: var(--jp-ui-font-color0);
        margin: 0;
      }
      .jp-GpusightVerdict-kicker {
        color: var(--jp-ui-font-color2);
        font-size: var(--jp-ui-font-size0);
        text-transform: uppercase;
        letter-spacing: 0.04em;
      }
      .jp-GpusightVerdict-summary {
        grid-column: 1 / -1;
        margin: 0;
      }
      .jp-GpusightVerdict-busy {
        text-align: right;
        min-width: 120px;
      }
      .jp-GpusightVerdict-busyValue {
        font-size: var(--jp-ui-font-size3);
        font-weight: 600;
      }
      .jp-GpusightVerdict-meter {
        height: 6px;
        border-radius: 3px;
        background: var(--jp-layout-color3);
        overflow: hidden;
      }
      .jp-GpusightVerdict-meterFill {
        height: 100%;
        background: var(--jp-brand-color1);
      }
    `
  ];

  @property({ attribute: false }) verdict: Verdict | null = null;

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightVerdict');
  }

  protected override render() {
    const v = this.verdict;
    if (!v) {
      return nothing;
    }
    const busy = typeof v.gpu_busy_pct === 'number' ? v.gpu_busy_pct : null;
    const label = BOTTLENECK_LABEL[v.bottleneck] ?? v.bottleneck;
    return html`<div class="jp-GpusightVerdict jp-mod-${v.bottleneck}">
      <div>
        <div class="jp-GpusightVerdict-kicker">Bottleneck</div>
        <h2 class="jp-GpusightVerdict-bottleneck">${label}</h2>
      </div>
      <div class="jp-GpusightVerdict-busy">
        <div class="jp-GpusightVerdict-kicker">GPU busy</div>
        <div class="jp-GpusightVerdict-busyValue">
          ${busy === null ? html`<span class="jp-Gpusight-muted">not measured</span>` : formatPct(busy)}
        </div>
        ${
          busy === null
            ? nothing
            : html`<div
                class="jp-GpusightVerdict-meter"
                role="meter"
                aria-label="GPU busy"
                aria-valuemin="0"
                aria-valuemax="100"
                aria-valuenow=${busy}
              >
                <div
                  class="jp-GpusightVerdict-meterFill"
                  style=${styleMap({ width: `${Math.min(100, Math.max(0, busy))}%` })}
                ></div>
              </div>`
        }
      </div>
      <p class="jp-GpusightVerdict-summary">${v.summary}</p>
    </div>`;
  }
}

define('gs-verdict', GsVerdict);

declare global {
  interface HTMLElementTagNameMap {
    'gs-verdict': GsVerdict;
  }
}
