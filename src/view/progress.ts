/** `<gs-progress>`: the stage a diagnosis is in, and how far it has come. */
import { LitElement, css, html } from 'lit';
import { property } from 'lit/decorators.js';
import { ifDefined } from 'lit/directives/if-defined.js';
import { styleMap } from 'lit/directives/style-map.js';
import { define } from './define';
import { baseStyles } from './styles';

export class GsProgress extends LitElement {
  static override styles = [
    baseStyles,
    css`
      .jp-GpusightProgress {
        padding: 6px 0;
      }
      .jp-GpusightProgress-stage {
        margin-bottom: 4px;
      }
      .jp-GpusightProgress-track {
        position: relative;
        height: 6px;
        border-radius: 3px;
        background: var(--jp-layout-color3);
        overflow: hidden;
      }
      .jp-GpusightProgress-bar {
        height: 100%;
        background: var(--jp-brand-color1);
        transition: width 0.2s ease-out;
      }
      .jp-GpusightProgress-track.jp-mod-indeterminate .jp-GpusightProgress-bar {
        width: 30%;
        animation: jp-GpusightProgress-slide 1.2s ease-in-out infinite;
      }
      @keyframes jp-GpusightProgress-slide {
        from {
          transform: translateX(-100%);
        }
        to {
          transform: translateX(340%);
        }
      }
      @media (prefers-reduced-motion: reduce) {
        .jp-GpusightProgress-track.jp-mod-indeterminate
          .jp-GpusightProgress-bar {
          animation: none;
          width: 100%;
          opacity: 0.4;
        }
      }
    `
  ];

  /** What is running now, e.g. "Benchmarking host-to-device copies". */
  @property() stage = '';
  /** 0-1, or null while the length of the stage is unknown. */
  @property({ type: Number }) fraction: number | null = null;

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightProgress');
  }

  protected override render() {
    const known =
      typeof this.fraction === 'number' && Number.isFinite(this.fraction);
    const pct = known
      ? Math.round(Math.min(1, Math.max(0, this.fraction as number)) * 100)
      : 0;
    const stage = this.stage || 'Working';
    return html`<div class="jp-GpusightProgress">
      <div class="jp-GpusightProgress-stage" aria-live="polite">
        ${stage}${known ? html` <span class="jp-Gpusight-muted">${pct}%</span>` : ''}
      </div>
      <div
        class="jp-GpusightProgress-track ${known ? '' : 'jp-mod-indeterminate'}"
        role="progressbar"
        aria-label="gpusight progress"
        aria-valuemin="0"
        aria-valuemax="100"
        aria-valuenow=${ifDefined(known ? pct : undefined)}
        aria-valuetext=${known ? `${stage}: ${pct}%` : stage}
      >
        <div
          class="jp-GpusightProgress-bar"
          style=${styleMap({ width: `${known ? pct : 30}%` })}
        ></div>
      </div>
    </div>`;
  }
}

define('gs-progress', GsProgress);

declare global {
  interface HTMLElementTagNameMap {
    'gs-progress': GsProgress;
  }
}
