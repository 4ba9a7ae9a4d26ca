/**
 * `<gs-fix-card>`: what to change, as code. The snippet is highlighted by a small tokenizer whose
 * pieces render as lit text bindings (never HTML). "Copy" uses the clipboard API with a fallback;
 * "Insert cell below" only announces the code in a `gs-insert-cell` event: the element knows
 * nothing about notebooks, and whichever host handles the event (the notebook widget's plugin)
 * calls `preventDefault()` to say it did. A fix whose change is to a notebook cell (`fix.cell`)
 * also offers "Show the cell" and "Apply to that cell" (`gs-show-cell`, `gs-apply-cell`): the
 * host answers in the event's `status`, which the card shows.
 */
import { LitElement, css, html, nothing, unsafeCSS } from 'lit';
import { property, state } from 'lit/decorators.js';
import type { CellPatch, Fix } from '../report';
import { define } from './define';
import { tokenize, type TokenKind } from './highlight';

// Between a patch's lines (a literal newline in the template would be reformatted away).
const NEWLINE = '\n';
import { baseStyles } from './styles';
import { SYNTAX_COLOR } from './tokens';

export interface InsertCellDetail {
  code: string;
  language: Fix['language'];
  findingId: string | null;
}

export const INSERT_CELL_EVENT = 'gs-insert-cell';

/** Asks the host to show or patch the notebook cell a fix changes; the host sets `status`. */
export interface CellActionDetail {
  cell: CellPatch;
  findingId: string | null;
  status: string | null;
  /** Set by the host when "Apply" changed the cell: the card then offers "Verify". */
  applied?: boolean;
  /** Set by the host when the action goes on after the event: the status once it ends. */
  settled?: Promise<string>;
}

export const SHOW_CELL_EVENT = 'gs-show-cell';
export const APPLY_CELL_EVENT = 'gs-apply-cell';
/** Run the changed cell, then the watched cell again, compared with this report. */
export const VERIFY_CELL_EVENT = 'gs-verify-cell';

/** Copy with the async clipboard API; fall back to a selected textarea + execCommand. */
export async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard?.writeText) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // Denied or unavailable (insecure context, no permission): try the old way below.
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.style.position = 'fixed';
  area.style.opacity = '0';
  document.body.appendChild(area);
  try {
    area.select();
    return (
      typeof document.execCommand === 'function' && document.execCommand('copy')
    );
  } catch {
    return false;
  } finally {
    area.remove();
  }
}

const syntaxRules = (Object.keys(SYNTAX_COLOR) as (keyof typeof SYNTAX_COLOR)[])
  .map(
    k => `.jp-GpusightFixCard-tok.jp-mod-${k} { color: ${SYNTAX_COLOR[k]}; }`
  )
  .join('\n');

export class GsFixCard extends LitElement {
  static override styles = [
    baseStyles,
    css`
      .jp-GpusightFixCard {
        border-left: 3px solid var(--jp-brand-color1);
        padding: 4px 0 4px 10px;
        margin-top: 6px;
      }
      .jp-GpusightFixCard-text {
        margin: 0 0 4px;
      }
      pre.jp-GpusightFixCard-code,
      pre.jp-GpusightFixCard-patch {
        margin: 0;
        padding: 6px 8px;
        background: var(--jp-cell-editor-background);
        border: var(--jp-border-width) solid var(--jp-cell-editor-border-color);
        border-radius: var(--jp-border-radius);
        color: var(--jp-content-font-color1);
        overflow-x: auto;
        white-space: pre;
      }
      .jp-GpusightFixCard-actions {
        display: flex;
        gap: 6px;
        align-items: center;
        margin-top: 4px;
      }
      .jp-GpusightFixCard-status {
        color: var(--jp-ui-font-color2);
      }
      .jp-GpusightFixCard-generic,
      .jp-GpusightFixCard-copyOnly {
        margin: 4px 0 2px;
        color: var(--jp-ui-font-color2);
        font-size: var(--jp-ui-font-size1);
      }
      .jp-GpusightFixCard-patchTitle {
        margin: 4px 0 2px;
        font-weight: 600;
      }
      pre.jp-GpusightFixCard-patch {
        margin-bottom: 6px;
      }
      .jp-GpusightFixCard-patchLine.jp-mod-added {
        color: var(--jp-success-color1);
      }
      .jp-GpusightFixCard-patchLine.jp-mod-removed {
        color: var(--jp-error-color1);
      }
      .jp-GpusightFixCard-patchLine.jp-mod-hunk {
        color: var(--jp-ui-font-color2);
      }
    `,
    // Token colors come from tokens.ts: constants of this module, never report data.
    unsafeCSS(syntaxRules)
  ];

  @property({ attribute: false }) fix: Fix | null = null;
  @property({ attribute: 'finding-id' }) findingId: string | null = null;
  /** Show "Insert cell below": set by a host that handles `gs-insert-cell`. */
  @property({ type: Boolean }) insertable = false;

  @state() private _status = '';
  @state() private _cellStatus = '';
  @state() private _applied = false;

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightFixCard');
  }

  private get _code(): string {
    return this.fix?.code ?? '';
  }

  private async _copy(): Promise<void> {
    const ok = await copyText(this._code);
    this._status = ok
      ? 'Copied'
      : 'Copy failed: select the code and copy it by hand';
  }

  private _insert(): void {
    const detail: InsertCellDetail = {
      code: this._code,
      language: this.fix?.language,
      findingId: this.findingId
    };
    const event = new CustomEvent<InsertCellDetail>(INSERT_CELL_EVENT, {
      detail,
      bubbles: true,
      composed: true,
      cancelable: true
    });
    this.dispatchEvent(event);
    this._status = event.defaultPrevented
      ? 'Inserted below (not run)'
      : 'No notebook here to insert into: use Copy';
  }

  private _cellAction(name: string, cell: CellPatch): void {
    const detail: CellActionDetail = {
      cell,
      findingId: this.findingId,
      status: null
    };
    const event = new CustomEvent<CellActionDetail>(name, {
      detail,
      bubbles: true,
      composed: true,
      cancelable: true
    });
    this.dispatchEvent(event);
    this._cellStatus = event.defaultPrevented
      ? (detail.status ?? '')
      : 'No notebook here: copy the change by hand';
    void detail.settled?.then(status => {
      this._cellStatus = status;
    });
    if (name === APPLY_CELL_EVENT) {
      this._applied = detail.applied === true;
    }
  }

  /** "Show the cell" / "Apply to that cell", where a host can do them. */
  private _cellActions(cell: CellPatch) {
    if (!this.insertable) {
      return nothing;
    }
    const name = cell.label ?? 'the cell';
    return html`<div class="jp-GpusightFixCard-actions">
      <button
        class="jp-GpusightFixCard-showCell"
        @click=${() => this._cellAction(SHOW_CELL_EVENT, cell)}
        aria-label="Show ${name} in the notebook, the changed line selected"
      >
        Show the cell
      </button>
      <button
        class="jp-GpusightFixCard-applyCell"
        @click=${() => this._cellAction(APPLY_CELL_EVENT, cell)}
        aria-label="Apply the change to ${name}, without running it"
      >
        Apply to that cell
      </button>
      ${
        this._applied
          ? html`<button
              class="jp-GpusightFixCard-verifyCell"
              @click=${() => this._cellAction(VERIFY_CELL_EVENT, cell)}
              aria-label="Verify: run ${name}, then the watched cell again, compared with this report"
            >
              Verify
            </button>`
          : nothing
      }
      <span class="jp-GpusightFixCard-cellStatus" role="status"
        >${this._cellStatus}</span
      >
    </div>`;
  }

  protected override render() {
    const fix = this.fix;
    if (!fix) {
      return nothing;
    }
    const code = this._code;
    const language = fix.language ?? 'python';
    const unbound = fix.unbound_names ?? [];
    // Only Python goes into a code cell as it is, and only code whose names the kernel has:
    // shell, text and code that would raise NameError are for copying.
    const canInsert =
      this.insertable &&
      code !== '' &&
      language === 'python' &&
      unbound.length === 0;
    return html`<div class="jp-GpusightFixCard">
      <p class="jp-GpusightFixCard-text">${fix.text}</p>
      ${fix.patch ? this._patch(fix.patch, fix.cell) : nothing}
      ${fix.cell ? this._cellActions(fix.cell) : nothing}
      ${unbound.length > 0 && code ? this._copyOnly(unbound) : nothing}
      ${
        code &&
        language === 'python' &&
        !fix.patch &&
        !fix.cell &&
        unbound.length === 0
          ? html`<p class="jp-GpusightFixCard-generic">
              Generic snippet: none of your lines was seen to change, so adapt
              its names to your code.
            </p>`
          : nothing
      }
      ${
        code
          ? html`<pre
                class="jp-GpusightFixCard-code"
                tabindex="0"
                aria-label="Fix code (${language})"
              ><code>${tokenize(code, language).map(t => this._token(t.kind, t.text))}</code></pre>
              <div class="jp-GpusightFixCard-actions">
                <button
                  class="jp-GpusightFixCard-copy"
                  @click=${this._copy}
                  aria-label="Copy the fix code"
                >
                  Copy
                </button>
                ${
                  canInsert
                    ? html`<button
                        class="jp-GpusightFixCard-insert"
                        @click=${this._insert}
                        aria-label="Insert the fix code in a new cell below, without running it"
                      >
                        Insert cell below
                      </button>`
                    : nothing
                }
                <span class="jp-GpusightFixCard-status" role="status"
                  >${this._status}</span
                >
              </div>`
          : nothing
      }
    </div>`;
  }

  /** Why the code is offered for Copy only: the names it reads that the kernel lacks. */
  private _copyOnly(names: string[]) {
    const list = names.map(n => `\`${n}\``).join(', ');
    const them = names.length === 1 ? 'it' : 'them';
    return html`<p class="jp-GpusightFixCard-copyOnly">
      Copy only: this code reads ${list}, which your kernel does not define;
      bind ${them} (or rename ${them} to your own) before running it.
    </p>`;
  }

  /** The change to the user's own lines: a unified diff, each line coloured by its kind. */
  private _patch(patch: string, cell: CellPatch | undefined) {
    const kind = (line: string) =>
      line.startsWith('+++') || line.startsWith('---')
        ? 'file'
        : line.startsWith('+')
          ? 'added'
          : line.startsWith('-')
            ? 'removed'
            : line.startsWith('@@')
              ? 'hunk'
              : 'context';
    return html`<p class="jp-GpusightFixCard-patchTitle">
        ${
          cell
            ? `Change to ${cell.label ?? 'your cell'}`
            : 'Change to your code (patch -p1)'
        }
      </p>
      <pre
        class="jp-GpusightFixCard-patch"
        tabindex="0"
        aria-label="Fix as a change to your code"
      ><code>${patch
        .replace(/\n$/, '')
        .split('\n')
        .map(
          line =>
            html`<span class="jp-GpusightFixCard-patchLine jp-mod-${kind(line)}"
                >${line}</span
              >${NEWLINE}`
        )}</code></pre>`;
  }

  private _token(kind: TokenKind, text: string) {
    return kind === 'plain'
      ? text
      : html`<span class="jp-GpusightFixCard-tok jp-mod-${kind}"
          >${text}</span
        >`;
  }
}

define('gs-fix-card', GsFixCard);

declare global {
  interface HTMLElementTagNameMap {
    'gs-fix-card': GsFixCard;
  }
  interface HTMLElementEventMap {
    'gs-insert-cell': CustomEvent<InsertCellDetail>;
    'gs-show-cell': CustomEvent<CellActionDetail>;
    'gs-apply-cell': CustomEvent<CellActionDetail>;
    'gs-verify-cell': CustomEvent<CellActionDetail>;
  }
}
