/** `<gs-verdict>`: the answer first: the bottleneck, how busy the GPU was, and one sentence. */
import { LitElement, css, html, nothing } from 'lit';
import { property } from 'lit/decorators.js';
import { styleMap } from 'lit/directives/style-map.js';
import { formatPct } from '../charts/format';
import type { Run, Verdict } from '../report';
import { define } from './define';
import { unifyTimes } from './findings';
import { baseStyles } from './styles';
import { BOTTLENECK_LABEL } from './tokens';

/** The bottleneck's name, in words that follow the machine (no GPU claims on a CPU run). */
export function verdictLabel(
  v: Verdict,
  gpu: boolean,
  cpuOnly: string | null
): string {
  if (
    cpuOnly !== null &&
    (v.bottleneck === 'none' || v.bottleneck === 'environment')
  ) {
    return 'CPU-only torch build';
  }
  if (!gpu && v.bottleneck === 'compute') {
    return 'Compute (the CPU is busy)';
  }
  return BOTTLENECK_LABEL[v.bottleneck] ?? v.bottleneck;
}

/** What the run raised before its first measured step (then nothing was measured), or null. */
export function raisedBeforeMeasuring(
  run: Run | null | undefined
): NonNullable<Run['error']> | null {
  const e = run?.error;
  return e && e.measured_steps === 0 ? e : null;
}

/** The summary, with a CPU-only build named first when the kernel side has not already. */
export function verdictSummary(v: Verdict, cpuOnly: string | null): string {
  const summary = unifyTimes(v.summary);
  if (cpuOnly === null || /CPU-only/i.test(summary)) {
    return summary;
  }
  return `torch ${cpuOnly} is a CPU-only build, so this ran without a GPU. ${summary}`.trim();
}

export class GsVerdict extends LitElement {
  static override styles = [
    baseStyles,
    css`
      :host {
        container-type: inline-size;
      }
      .jp-GpusightVerdict {
        display: grid;
        grid-template-columns: minmax(0, 1fr) auto;
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
      .jp-GpusightVerdict.jp-mod-error {
        border-left-color: var(--jp-error-color1);
      }
      .jp-GpusightVerdict-bottleneck {
        overflow-wrap: anywhere;
        font-size: var(--jp-ui-font-size3);
        font-weight: 600;
        color: var(--jp-ui-font-color0);
        margin: 0;
      }
      .jp-GpusightVerdict-kicker {
        color: var(--jp-ui-font-color2);
        font-size: max(11px, var(--jp-ui-font-size0));
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
      /* The sidebar (250 px): one column, the busy share under the bottleneck. */
      @container (max-width: 360px) {
        .jp-GpusightVerdict {
          grid-template-columns: minmax(0, 1fr);
        }
        .jp-GpusightVerdict-busy {
          text-align: left;
          min-width: 0;
        }
      }
    `
  ];

  @property({ attribute: false }) verdict: Verdict | null = null;
  /** The run could use a GPU: false on a CPU run, where "GPU busy" reads "no GPU in use". */
  @property({ type: Boolean }) gpu = true;
  /** torch's version when it is a CPU-only build: the verdict names that first. */
  @property({ attribute: false }) cpuOnly: string | null = null;
  /** What the run raised before its first measured step: the verdict is that exception. */
  @property({ attribute: false }) raised: NonNullable<Run['error']> | null =
    null;

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightVerdict');
  }

  protected override render() {
    const v = this.verdict;
    if (!v) {
      return nothing;
    }
    const busy =
      this.gpu && typeof v.gpu_busy_pct === 'number' ? v.gpu_busy_pct : null;
    const raised = this.raised;
    const label = raised
      ? `${raised.type} raised`
      : verdictLabel(v, this.gpu, this.cpuOnly);
    // A raised run's summary is the exception: no CPU-only build ahead of it.
    const summary = raised
      ? unifyTimes(v.summary)
      : verdictSummary(v, this.cpuOnly);
    const mod = raised ? 'error' : v.bottleneck;
    return html`<div class="jp-GpusightVerdict jp-mod-${mod}">
      <div>
        <div class="jp-GpusightVerdict-kicker">
          ${raised ? 'The run stopped' : 'Bottleneck'}
        </div>
        <h2 class="jp-GpusightVerdict-bottleneck">${label}</h2>
      </div>
      <div class="jp-GpusightVerdict-busy">
        <div class="jp-GpusightVerdict-kicker">GPU busy</div>
        <div class="jp-GpusightVerdict-busyValue">
          ${
            busy !== null
              ? formatPct(busy)
              : html`<span class="jp-Gpusight-muted"
                  >${this.gpu ? 'not measured' : 'no GPU in use'}</span
                >`
          }
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
      <p class="jp-GpusightVerdict-summary">${summary}</p>
    </div>`;
  }
}

define('gs-verdict', GsVerdict);

declare global {
  interface HTMLElementTagNameMap {
    'gs-verdict': GsVerdict;
  }
}
