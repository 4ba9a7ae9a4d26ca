/**
 * `<gs-host-lines>`: where the host's time goes, by line of the user's code (`run.host_lines`,
 * schema 1.6): the costliest lines, each with its time per step and share, whether it runs inside
 * a `forward` and whether the host waits there for the GPU.
 */
import { LitElement, css, html, nothing } from 'lit';
import { property } from 'lit/decorators.js';
import { formatMs, formatPct } from '../charts/format';
import type { Run } from '../report';
import { define } from './define';
import { baseStyles, sectionStyles } from './styles';

type HostLines = NonNullable<Run['host_lines']>;
type HostLine = HostLines['lines'][number];

/** Lines shown: the costliest, each at least this share of the timed steps. */
export const SHOWN = 5;
export const MIN_SHARE_PCT = 1;

export function shownLines(timed: HostLines | null | undefined): HostLine[] {
  return (timed?.lines ?? [])
    .filter(l => l.share_pct >= MIN_SHARE_PCT)
    .slice(0, SHOWN);
}

export class GsHostLines extends LitElement {
  static override styles = [
    baseStyles,
    sectionStyles,
    css`
      ol {
        margin: 4px 0 0;
        padding-left: 20px;
      }
      li {
        margin: 0 0 6px;
      }
      .jp-GpusightHostLines-where {
        font-weight: 600;
        overflow-wrap: anywhere;
      }
      .jp-GpusightHostLines-code {
        display: block;
        font-family: var(--jp-code-font-family);
        font-size: var(--jp-code-font-size);
        color: var(--jp-ui-font-color1);
        overflow-wrap: anywhere;
        white-space: pre-wrap;
      }
      .jp-GpusightHostLines-tag {
        color: var(--jp-ui-font-color2);
      }
      .jp-GpusightHostLines-why {
        margin: 4px 0 0;
        color: var(--jp-ui-font-color2);
      }
    `
  ];

  @property({ attribute: false }) run: Run | null = null;

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightHostLines');
  }

  protected override render() {
    const timed = this.run?.host_lines;
    if (!timed) {
      return nothing;
    }
    const lines = shownLines(timed);
    return html`<section aria-label="Where the host time goes">
      <h3>Where the host time goes</h3>
      ${
        lines.length
          ? html`<ol>
              ${lines.map(l => this._line(l))}
            </ol>`
          : html`<p class="jp-GpusightHostLines-why">
              Not timed by line:
              ${timed.unavailable ?? 'no line of your code ran'}
            </p>`
      }
      ${
        lines.length && timed.steps
          ? html`<p class="jp-GpusightHostLines-why">
              Timed over ${timed.steps} steps after the measured ones; each
              line's time leaves out the lines of yours it
              calls.${this._slowed()}
            </p>`
          : nothing
      }
    </section>`;
  }

  /** Where the line clock slowed its steps (a framework's loop of many Python calls), as
   * text_report's `_traced` says it: the shares hold, the times are the traced steps'. */
  private _slowed(): string {
    const traced = this.run?.host_lines?.step_ms ?? 0;
    const step = this.run?.step_time_ms ?? 0;
    return step && traced >= 1.5 * step
      ? ` Tracing slowed those steps to ${formatMs(traced)} each (${formatMs(step)} measured): the shares hold.`
      : '';
  }

  private _line(l: HostLine) {
    const tags = [
      l.in_forward ? 'in forward' : null,
      l.waiting ? 'waits for the GPU' : null
    ].filter(Boolean);
    return html`<li>
      <span class="jp-GpusightHostLines-where">${l.file}:${l.line}</span>
      ${formatMs(l.ms_per_step)} a step (${formatPct(l.share_pct)})
      ${
        tags.length
          ? html`<span class="jp-GpusightHostLines-tag"
              >· ${tags.join(', ')}</span
            >`
          : nothing
      }
      ${l.code ? html`<code class="jp-GpusightHostLines-code">${l.code}</code>` : nothing}
    </li>`;
  }
}

define('gs-host-lines', GsHostLines);

declare global {
  interface HTMLElementTagNameMap {
    'gs-host-lines': GsHostLines;
  }
}
