/**
 * The "GPU" sidebar: the active kernel's live monitor, the diagnosis buttons and the session's
 * reports, drawn with the same lit elements as the notebook widget (`<gs-report>`).
 *
 * A Lumino widget so JupyterLab can dock it; its content is a lit template rendered into the
 * light DOM (JupyterLab's button styles apply). Data attributes on the node say what it shows,
 * for the UI tests and for anyone debugging: data-state, data-kernel-name/-id, data-session-path,
 * data-samples (ticks received), data-cells (cell marks held), data-connects, data-monitor.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';
import type { Message } from '@lumino/messaging';
import { html, nothing, render, type TemplateResult } from 'lit';
import { exportReport, reportExporter } from '../export/exporter';
import '../view/progress';
import '../view/report';
import { copyText } from '../view/fix-card';
import { humanTime } from '../view/not-run';
import { installCommand, type BridgeState } from './bridge';
import type { FollowTarget } from './follower';
import { gpuIcon } from './icon';
import './monitor-view';
import { KernelSession } from './session';
import { DEFAULT_SETTINGS, type SidebarSettings } from './settings';

export const SIDEBAR_ID = 'gpusight-sidebar';

/**
 * The first gpusight whose kernel side has HTML export (gpusight.html_export) and %%gpusight:
 * a kernel with an older one gets those buttons disabled, with this in the tooltip.
 */
export const FEATURE_MIN_VERSION = '0.1.0';

/** Redraws for new samples at most this often (ms); other changes draw at once. */
const TICK_REDRAW_MS = 250;

const WINDOWS: [number, string][] = [
  [60, '1 min'],
  [300, '5 min'],
  [900, '15 min'],
  [Infinity, 'All']
];

export class GpusightSidebar extends Widget {
  private _sessions = new Map<ISessionContext, KernelSession>();
  private _target: FollowTarget | null = null;
  private _settings: SidebarSettings = { ...DEFAULT_SETTINGS };
  private _windowS = 60;
  private _paused = false;
  /** Shown at least once: from then on, followed kernels get a bridge. */
  private _engaged = false;
  private _timer: number | null = null;
  private _lastDraw = 0;
  /** Called when what the commands can do changes (their enabled state). */
  onCommandsChanged: (() => void) | null = null;

  constructor() {
    super();
    this.id = SIDEBAR_ID;
    this.addClass('jp-GpusightSidebar');
    this.title.icon = gpuIcon;
    this.title.caption = 'GPU: live monitor and diagnosis (gpusight)';
    this._draw();
  }

  // --- what the panel follows -----------------------------------------------------------

  get session(): KernelSession | null {
    return this._target
      ? (this._sessions.get(this._target.sessionContext) ?? null)
      : null;
  }

  /** Follow a notebook or console (null: none). Other kernels' monitors pause. */
  follow(target: FollowTarget | null): void {
    this._target?.widget.title.changed.disconnect(this._update, this);
    this._target = target;
    // A rename changes the tab's label: show the new name.
    target?.widget.title.changed.connect(this._update, this);
    this._ensureSession();
    this._applyMonitor();
    this._update();
  }

  /**
   * The session (bridge, history) of the followed kernel, created once the panel has been
   * shown: a user who never opens the GPU panel gets nothing imported into their kernels.
   */
  private _ensureSession(): void {
    const target = this._target;
    if (
      !this._engaged ||
      !target ||
      this._sessions.has(target.sessionContext)
    ) {
      return;
    }
    const ctx = target.sessionContext;
    const session = new KernelSession(
      ctx,
      this._sessionSettings(),
      (s, ticksOnly) => this._onSessionChanged(s, ticksOnly)
    );
    this._sessions.set(ctx, session);
    ctx.disposed.connect(() => {
      this._sessions.delete(ctx);
      this._update();
    });
  }

  setSettings(settings: SidebarSettings): void {
    this._settings = { ...settings };
    for (const session of this._sessions.values()) {
      session.applySettings(this._sessionSettings());
    }
    this._update();
  }

  // --- actions (buttons and commands) ---------------------------------------------------

  get canRun(): boolean {
    const s = this.session;
    return !!s && s.state.kind === 'ready' && !s.activity;
  }

  get canWatch(): boolean {
    const s = this.session;
    return !!s && s.state.kind === 'ready' && s.state.hello.capabilities.watch;
  }

  /** Whenever a report is on show: the export runs in the browser, not in the kernel. */
  get canExport(): boolean {
    return !!reportExporter() && !!this.session?.shownReport;
  }

  get isArmed(): boolean {
    return this.session?.armed ?? false;
  }

  check(): boolean {
    return this.session?.start('check', 'Checking the environment') ?? false;
  }

  benchmark(): boolean {
    return (
      this.session?.start('bench', 'Benchmarking', {
        budget_s: this._settings.benchmarkBudgetS
      }) ?? false
    );
  }

  toggleWatch(): boolean {
    return this.canWatch && (this.session?.toggleWatch() ?? false);
  }

  /** The report on show, through the report's own Export HTML (same file, same name). */
  async exportReport(): Promise<string | null> {
    const s = this.session;
    const report = s?.shownReport;
    if (!s || !report || !this.canExport) {
      return null;
    }
    try {
      const name = await exportReport(report);
      s.tell({ kind: 'info', text: `Exported ${name}` });
      return name;
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      s.tell({ kind: 'error', text: `Export failed: ${why}` });
      return null;
    }
  }

  override dispose(): void {
    if (this.isDisposed) {
      return;
    }
    if (this._timer !== null) {
      window.clearTimeout(this._timer);
    }
    for (const session of this._sessions.values()) {
      session.dispose();
    }
    this._sessions.clear();
    super.dispose();
  }

  // --- visibility: the monitor runs only while someone can see it -----------------------

  protected override onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._engaged = true;
    this._ensureSession();
    this._applyMonitor();
    this._update();
  }

  protected override onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this._applyMonitor();
  }

  private _applyMonitor(): void {
    const current = this.session;
    for (const session of this._sessions.values()) {
      session.setMonitor(
        session === current && this.isVisible && !this._paused
      );
    }
  }

  private _sessionSettings() {
    return {
      hz: this._settings.sampleRateHz,
      capacity: this._settings.historyLength
    };
  }

  // --- drawing --------------------------------------------------------------------------

  private _onSessionChanged(session: KernelSession, ticksOnly: boolean): void {
    if (session !== this.session) {
      return;
    }
    if (!ticksOnly) {
      this.onCommandsChanged?.();
      this._update();
      return;
    }
    // Samples come at up to 10 Hz: draw at most every TICK_REDRAW_MS, and not while hidden.
    if (this._timer !== null || !this.isVisible) {
      this._setAttributes();
      return;
    }
    const wait = Math.max(
      0,
      this._lastDraw + TICK_REDRAW_MS - performance.now()
    );
    this._timer = window.setTimeout(() => {
      this._timer = null;
      this._draw();
    }, wait);
  }

  private _update(): void {
    this.onCommandsChanged?.();
    this._draw();
  }

  private _setAttributes(): void {
    const s = this.session;
    const node = this.node;
    const set = (name: string, value: string | number | null) =>
      value === null
        ? node.removeAttribute(name)
        : node.setAttribute(name, String(value));
    set('data-state', s ? s.state.kind : 'no-notebook');
    set('data-kernel-name', s?.sessionContext.session?.kernel?.name ?? null);
    set('data-kernel-id', s?.sessionContext.session?.kernel?.id ?? null);
    set('data-session-path', s && this._target ? this._target.path() : null);
    set('data-samples', s ? s.store.received : 0);
    set('data-connects', s ? s.bridge.connects : 0);
    set('data-monitor', s?.monitorOn ? 'on' : 'off');
    set('data-armed', s?.armed ? 'true' : 'false');
    set('data-reports', s ? s.entries.length : 0);
    set('data-cells', s ? s.store.cells.length : 0);
  }

  private _draw(): void {
    this._lastDraw = performance.now();
    this._setAttributes();
    render(this._template(), this.node);
  }

  private _template(): TemplateResult {
    const s = this.session;
    return html`<div class="jp-GpusightSidebar-content">
      <header class="jp-GpusightSidebar-header">
        <h2 class="jp-GpusightSidebar-title">GPU</h2>
        ${this._targetLine(s)}
      </header>
      ${
        s
          ? this._body(s)
          : html`<p class="jp-GpusightSidebar-hint">
              Open a notebook or console: this panel follows its kernel.
            </p>`
      }
    </div>`;
  }

  private _targetLine(s: KernelSession | null) {
    const target = this._target;
    if (!s || !target) {
      return nothing;
    }
    return html`<div class="jp-GpusightSidebar-target">
      <span class="jp-GpusightSidebar-doc" title=${target.path()}
        >${target.widget.title.label}</span
      >
      <span class="jp-GpusightSidebar-kernel"
        >${s.sessionContext.kernelDisplayName}</span
      >
    </div>`;
  }

  private _body(s: KernelSession): TemplateResult {
    const state = s.state;
    if (state.kind !== 'ready') {
      return this._stateBox(s, state);
    }
    // The buttons first: they stay put while the charts below appear and grow.
    return html`${this._connectedLine(state)} ${this._actions(s, state)}
    ${this._monitor(s)} ${this._reports(s)}`;
  }

  private _stateBox(s: KernelSession, state: BridgeState): TemplateResult {
    const retry = html`<button
      class="jp-mod-styled jp-GpusightSidebar-retry"
      @click=${() => s.bridge.retry()}
    >
      Retry
    </button>`;
    switch (state.kind) {
      case 'idle':
        return html`<p class="jp-GpusightSidebar-hint">
          No kernel: start one to monitor it.
        </p>`;
      case 'connecting':
        return html`<p class="jp-GpusightSidebar-hint" aria-live="polite">
          Connecting to the
          kernel${
            s.sessionContext.session?.kernel?.status === 'busy'
              ? ' (it is busy: gpusight connects when the running cell ends)'
              : ''
          }…
        </p>`;
      case 'restarting':
        return html`<p class="jp-GpusightSidebar-hint" aria-live="polite">
          Kernel restarting…
        </p>`;
      case 'dead':
        return html`<p class="jp-GpusightSidebar-hint">
          The kernel died. Restart it to go on.
        </p>`;
      case 'unsupported':
        return html`<p class="jp-GpusightSidebar-hint">
          This is a ${state.language} kernel; gpusight needs a Python kernel.
        </p>`;
      case 'failed':
        return html`<div class="jp-GpusightSidebar-problem" role="alert">
          <p>
            gpusight could not connect to this kernel:
            <code>${state.error}</code>
          </p>
          ${retry}
        </div>`;
      case 'missing': {
        const cmd = installCommand(state.executable);
        const what =
          state.reason === 'absent'
            ? html`gpusight is not installed in this kernel's environment`
            : state.reason === 'outdated'
              ? html`This kernel's gpusight is too old for this panel`
              : html`gpusight failed to import in this kernel`;
        return html`<div class="jp-GpusightSidebar-missing" role="alert">
          <p>
            <strong>${what}</strong>${
              state.executable
                ? html` (<code>${state.executable}</code>)`
                : nothing
            }.
          </p>
          <p>
            ${state.reason === 'broken' ? html`<code>${state.error}</code><br />` : nothing}
            ${state.reason === 'absent' ? 'Install it there' : 'Upgrade it there'},
            then restart the kernel:
          </p>
          <pre class="jp-GpusightSidebar-install">
${
              state.reason === 'absent'
                ? cmd
                : cmd.replace('install', 'install --upgrade')
            }</pre>
          <button
            class="jp-mod-styled"
            @click=${() => void copyText(state.reason === 'absent' ? cmd : cmd.replace('install', 'install --upgrade'))}
          >
            Copy command
          </button>
          ${retry}
        </div>`;
      }
      default:
        return html``;
    }
  }

  private _connectedLine(state: Extract<BridgeState, { kind: 'ready' }>) {
    const h = state.hello;
    return html`<div class="jp-GpusightSidebar-connected" title=${h.executable}>
      gpusight ${h.version} · Python ${h.python}
    </div>`;
  }

  private _monitor(s: KernelSession): TemplateResult {
    const st = s.store.status;
    const on = s.monitorOn;
    const source = st?.source ?? null;
    return html`<section
      class="jp-GpusightSidebar-monitor"
      aria-label="Live monitor"
    >
      <div class="jp-GpusightSidebar-bar">
        <span
          class="jp-GpusightSidebar-live ${on ? 'jp-mod-on' : ''}"
          aria-live="off"
        >
          ${on ? '● Live' : '❚❚ Paused'} · ${st ? `${st.hz} Hz` : '–'} ·
          <span class="jp-GpusightSidebar-samples">${s.store.received}</span>
          samples
        </span>
        <button
          class="jp-mod-styled jp-GpusightSidebar-pause"
          @click=${() => {
            this._paused = !this._paused;
            this._applyMonitor();
            this._update();
          }}
        >
          ${this._paused ? 'Resume' : 'Pause'}
        </button>
        <label class="jp-GpusightSidebar-window">
          <span class="jp-Gpusight-srOnly">History shown</span>
          <select
            class="jp-mod-styled"
            @change=${(e: Event) => {
              this._windowS = Number((e.target as HTMLSelectElement).value);
              this._draw();
            }}
          >
            ${WINDOWS.map(
              ([w, label]) =>
                html`<option
                  value=${String(w)}
                  ?selected=${w === this._windowS}
                >
                  ${label}
                </option>`
            )}
          </select>
        </label>
      </div>
      ${
        source === 'host' || source === 'none'
          ? html`<p class="jp-GpusightSidebar-nogpu">
              <strong>No GPU to monitor</strong
              >${st?.reason ? html`: ${st.reason}` : nothing}.
              ${source === 'host' ? "Showing the host's CPU and memory instead." : 'psutil is missing too: nothing to show.'}
            </p>`
          : st && st.gpus.length
            ? html`<p class="jp-GpusightSidebar-gpus">
                ${st.gpus.map(g => `GPU ${g.index}: ${g.name}`).join(' · ')}
              </p>`
            : nothing
      }
      <gs-live-monitor
        .store=${s.store}
        .version=${s.store.version}
        .windowS=${this._windowS}
      ></gs-live-monitor>
    </section>`;
  }

  private _actions(
    s: KernelSession,
    state: Extract<BridgeState, { kind: 'ready' }>
  ) {
    const caps = state.hello.capabilities;
    const busy = !!s.activity;
    const exportTitle = this.canExport
      ? 'Save the report shown as one HTML file that opens in any browser, offline'
      : 'Run a cell that shows a report, a check, a benchmark or watch a cell first';
    const watchTitle = !caps.watch
      ? `Watching a cell needs gpusight ≥ ${FEATURE_MIN_VERSION} (%%gpusight); this kernel has ${state.hello.version}`
      : s.armed
        ? 'Armed: the next cell you run is watched. Click to cancel'
        : 'Watch the next cell you run with %%gpusight';
    return html`<section
      class="jp-GpusightSidebar-actions"
      aria-label="Diagnosis"
    >
      <div class="jp-GpusightSidebar-buttons">
        <button
          class="jp-mod-styled jp-mod-accept jp-GpusightSidebar-check"
          ?disabled=${busy}
          title="Check the kernel's environment: torch, CUDA, driver, GPU settings"
          @click=${() => this.check()}
        >
          Check environment
        </button>
        <button
          class="jp-mod-styled jp-GpusightSidebar-bench"
          ?disabled=${busy}
          title=${`Measure the hardware's ceilings (about ${this._settings.benchmarkBudgetS} s)`}
          @click=${() => this.benchmark()}
        >
          Benchmark
        </button>
        <button
          class="jp-mod-styled jp-GpusightSidebar-watch ${s.armed ? 'jp-mod-active' : ''}"
          ?disabled=${!caps.watch}
          aria-pressed=${s.armed ? 'true' : 'false'}
          title=${watchTitle}
          @click=${() => this.toggleWatch()}
        >
          ${s.armed ? 'Watching next cell…' : 'Watch next cell'}
        </button>
        <button
          class="jp-mod-styled jp-GpusightSidebar-export"
          ?disabled=${!this.canExport}
          title=${exportTitle}
          @click=${() => void this.exportReport()}
        >
          Export
        </button>
      </div>
      ${
        s.activity
          ? html`<gs-progress
              .stage=${s.activity.stage}
              .fraction=${s.activity.fraction}
            ></gs-progress>`
          : nothing
      }
      ${
        s.notice
          ? html`<p
              class="jp-GpusightSidebar-notice jp-mod-${s.notice.kind}"
              role=${s.notice.kind === 'error' ? 'alert' : 'status'}
            >
              ${s.notice.text}
            </p>`
          : nothing
      }
    </section>`;
  }

  private _reports(s: KernelSession) {
    if (!s.entries.length) {
      return nothing;
    }
    const shownId = s.shownId;
    const report = s.shownReport;
    const earlier = [...s.entries].reverse();
    return html`<section
      class="jp-GpusightSidebar-reports"
      aria-label="Reports"
    >
      ${
        report
          ? html`<gs-report .report=${report} no-export></gs-report>`
          : html`<p class="jp-GpusightSidebar-hint">Loading the report…</p>`
      }
      ${
        earlier.length > 1
          ? html`<h3 class="jp-GpusightSidebar-subtitle">
                Reports in this session
              </h3>
              <ul class="jp-GpusightSidebar-history">
                ${earlier.map(
                  e =>
                    html`<li>
                      <button
                        class="jp-GpusightSidebar-entry ${e.id === shownId ? 'jp-mod-current' : ''}"
                        aria-current=${e.id === shownId ? 'true' : 'false'}
                        data-report-id=${e.id}
                        @click=${() => s.show(e.id)}
                      >
                        <span class="jp-GpusightSidebar-entryKind"
                          >${e.title ?? e.kind}</span
                        >
                        <span class="jp-GpusightSidebar-entryTime"
                          >${humanTime(e.created_at)}</span
                        >
                        ${
                          e.summary
                            ? html`<span class="jp-GpusightSidebar-entrySummary"
                                >${e.summary}</span
                              >`
                            : nothing
                        }
                      </button>
                    </li>`
                )}
              </ul>`
          : nothing
      }
    </section>`;
  }
}
