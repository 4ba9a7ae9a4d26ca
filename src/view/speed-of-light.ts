/** `<gs-speed-of-light>`: how far the step is from the GPU's limit, as bars of MFU per ceiling. */
import { LitElement, css, html, nothing } from 'lit';
import { property } from 'lit/decorators.js';
import { styleMap } from 'lit/directives/style-map.js';
import { readSpeedOfLight, type SpeedOfLight } from '../charts/speed-of-light';
import type { Run } from '../report';
import { define } from './define';
import { baseStyles, sectionStyles } from './styles';
import { MFU_COLOR } from './tokens';

export class GsSpeedOfLight extends LitElement {
  static override styles = [
    baseStyles,
    sectionStyles,
    css`
      .jp-GpusightSpeedOfLight-facts {
        margin: 0 0 6px;
        color: var(--jp-ui-font-color1);
      }
      .jp-GpusightSpeedOfLight-bar {
        display: grid;
        grid-template-columns: minmax(0, 1fr);
        gap: 2px;
        margin: 6px 0;
      }
      .jp-GpusightSpeedOfLight-track {
        height: 10px;
        border-radius: var(--jp-border-radius);
        background: var(--jp-layout-color3);
        overflow: hidden;
      }
      .jp-GpusightSpeedOfLight-fill {
        height: 100%;
      }
      .jp-GpusightSpeedOfLight-why {
        margin: 4px 0 0;
        color: var(--jp-ui-font-color2);
      }
    `
  ];

  @property({ attribute: false }) run: Run | null = null;

  private _view: SpeedOfLight | null = null;

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightSpeedOfLight');
  }

  protected override willUpdate(): void {
    this._view = readSpeedOfLight(this.run);
  }

  protected override render() {
    const v = this._view;
    if (!v) {
      return nothing;
    }
    const facts = [
      v.flops ? `${v.flops} per step${v.mix ? ` (${v.mix})` : ''}` : null,
      v.reached ? `reached ${v.reached}` : null
    ].filter(Boolean);
    return html`<section aria-label="Speed of light">
      <h3>Speed of light</h3>
      ${
        facts.length
          ? html`<p class="jp-GpusightSpeedOfLight-facts">
              ${facts.join(' · ')}
            </p>`
          : nothing
      }
      ${v.bars.map(
        b =>
          html`<div class="jp-GpusightSpeedOfLight-bar" title=${b.label}>
            <span>MFU ${b.text}</span>
            <div
              class="jp-GpusightSpeedOfLight-track"
              role="meter"
              aria-valuemin="0"
              aria-valuemax="100"
              aria-valuenow=${Math.min(100, b.pct)}
              aria-label=${`MFU ${b.text}`}
            >
              <div
                class="jp-GpusightSpeedOfLight-fill"
                style=${styleMap({
                  width: `${Math.min(100, Math.max(0, b.pct))}%`,
                  background: MFU_COLOR[b.source]
                })}
              ></div>
            </div>
          </div>`
      )}
      ${
        v.unavailable
          ? html`<p class="jp-GpusightSpeedOfLight-why">
              ${v.flops ? 'MFU' : 'FLOPs'} not given: ${v.unavailable}
            </p>`
          : nothing
      }
    </section>`;
  }
}

define('gs-speed-of-light', GsSpeedOfLight);

declare global {
  interface HTMLElementTagNameMap {
    'gs-speed-of-light': GsSpeedOfLight;
  }
}
