/** `<gs-error>`: a report that cannot be shown, naming the field and saying what to do. */
import { LitElement, css, html, nothing } from 'lit';
import { property } from 'lit/decorators.js';
import { define } from './define';
import { baseStyles } from './styles';

export class GsError extends LitElement {
  static override styles = [
    baseStyles,
    css`
      .jp-GpusightError {
        border: var(--jp-border-width) solid var(--jp-error-color1);
        border-left-width: 4px;
        border-radius: var(--jp-border-radius);
        background: var(--jp-layout-color1);
        padding: 8px 12px;
      }
      .jp-GpusightError-path {
        color: var(--jp-error-color1);
      }
      p {
        margin: 4px 0;
      }
    `
  ];

  @property() heading = 'This report cannot be shown';
  /** The offending field, e.g. `findings[0].severity`. */
  @property() path = '';
  @property() message = '';
  /** What to do about it. */
  @property() hint = '';

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightError');
  }

  protected override render() {
    return html`<div class="jp-GpusightError" role="alert">
      <h3>${this.heading}</h3>
      ${
        this.path
          ? html`<p>
              Field: <code class="jp-GpusightError-path">${this.path}</code>
            </p>`
          : nothing
      }
      <p class="jp-GpusightError-message">${this.message}</p>
      ${this.hint ? html`<p class="jp-Gpusight-muted">${this.hint}</p>` : nothing}
    </div>`;
  }
}

define('gs-error', GsError);

declare global {
  interface HTMLElementTagNameMap {
    'gs-error': GsError;
  }
}
