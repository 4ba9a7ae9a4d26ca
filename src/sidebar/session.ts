/**
 * Everything the sidebar knows about one notebook's (or console's) kernel: the bridge, the
 * monitor's history, the session's reports and what is running. Survives switching to another
 * notebook and back; goes when the notebook closes.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { Kernel } from '@jupyterlab/services';
import type { GpusightReport } from '../report';
import { KernelBridge, type BridgeState } from './bridge';
import type { KernelMessage, ReportEntry } from './messages';
import { MonitorStore } from './store';

/** Reports kept in the browser per kernel (the kernel keeps as many). */
export const MAX_REPORTS = 20;

export interface Activity {
  request: string;
  label: string;
  stage: string;
  fraction: number | null;
}

export interface Notice {
  kind: 'info' | 'error';
  text: string;
}

export interface SessionSettings {
  hz: number;
  capacity: number;
}

export class KernelSession {
  readonly bridge: KernelBridge;
  readonly store: MonitorStore;
  entries: ReportEntry[] = [];
  readonly reports = new Map<string, GpusightReport>();
  shown: string | null = null;
  activity: Activity | null = null;
  notice: Notice | null = null;
  armed = false;
  private _monitorOn = false;
  private _settings: SessionSettings;
  private _disposed = false;

  constructor(
    readonly sessionContext: ISessionContext,
    settings: SessionSettings,
    private readonly _changed: (
      session: KernelSession,
      ticksOnly: boolean
    ) => void
  ) {
    this._settings = { ...settings };
    this.store = new MonitorStore(settings.capacity);
    this.bridge = new KernelBridge({
      onState: state => this._onState(state),
      onMessage: message => this._onMessage(message),
      since: () => this.store.lastT
    });
    sessionContext.kernelChanged.connect(this._onKernelChanged, this);
    sessionContext.statusChanged.connect(this._onStatus, this);
    sessionContext.disposed.connect(this.dispose, this);
    void sessionContext.ready.then(() => {
      if (!this._disposed) {
        this.bridge.setKernel(sessionContext.session?.kernel ?? null);
      }
    });
  }

  get state(): BridgeState {
    return this.bridge.state;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  get monitorOn(): boolean {
    return this._monitorOn;
  }

  /** The report on show: the one clicked, else the newest. */
  get shownReport(): GpusightReport | null {
    const id = this.shown ?? this.entries[this.entries.length - 1]?.id ?? null;
    return id ? (this.reports.get(id) ?? null) : null;
  }

  get shownId(): string | null {
    return this.shown ?? this.entries[this.entries.length - 1]?.id ?? null;
  }

  setMonitor(on: boolean): void {
    this._monitorOn = on;
    this.bridge.setMonitor({
      on,
      hz: this._settings.hz,
      capacity: this._settings.capacity
    });
  }

  applySettings(settings: SessionSettings): void {
    this._settings = { ...settings };
    this.store.resize(settings.capacity);
    this.setMonitor(this._monitorOn);
  }

  /** Starts a kernel-side job (check, bench, ...); false when not connected or one is running. */
  start(
    type: string,
    label: string,
    payload: Record<string, number | string> = {}
  ): boolean {
    if (this.activity) {
      return false;
    }
    const request = this.bridge.request(type, payload);
    if (!request) {
      return false;
    }
    this.activity = { request, label, stage: label, fraction: null };
    this.notice = null;
    this._emit();
    return true;
  }

  toggleWatch(): boolean {
    const sent = this.armed
      ? this.bridge.send({ type: 'watch.disarm' })
      : this.bridge.request('watch.arm') !== null;
    return sent;
  }

  /** Shows `notice` under the buttons (an export's outcome, say). */
  tell(notice: Notice): void {
    this.notice = notice;
    this._emit();
  }

  /** Shows an earlier report, fetching it from the kernel when the browser no longer has it. */
  show(id: string): void {
    this.shown = id;
    if (!this.reports.has(id)) {
      this.bridge.request('report.get', { report_id: id });
    }
    this._emit();
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this.sessionContext.kernelChanged.disconnect(this._onKernelChanged, this);
    this.sessionContext.statusChanged.disconnect(this._onStatus, this);
    this.sessionContext.disposed.disconnect(this.dispose, this);
    this.bridge.dispose();
  }

  // --- internals ------------------------------------------------------------------------

  private _emit(ticksOnly = false): void {
    if (!this._disposed) {
      this._changed(this, ticksOnly);
    }
  }

  /**
   * After a page reload the kernel's hello lists its reports without their bodies: fetch the one
   * on show, or the panel would say "Loading the report…" until one is clicked.
   */
  private _fetchShown(): void {
    const id = this.shownId;
    if (id && !this.reports.has(id)) {
      this.bridge.request('report.get', { report_id: id });
    }
  }

  private _onKernelChanged(): void {
    this.bridge.setKernel(this.sessionContext.session?.kernel ?? null);
  }

  private _onStatus(_: ISessionContext, status: Kernel.Status): void {
    this.bridge.kernelStatus(status);
  }

  private _onState(state: BridgeState): void {
    if (state.kind !== 'ready') {
      // Whatever ran in the kernel is gone with the connection.
      this.activity = null;
      this.armed = false;
    }
    this._emit();
  }

  private _onMessage(m: KernelMessage): void {
    switch (m.type) {
      case 'hello': {
        const restarted = this.store.pid !== null && this.store.pid !== m.pid;
        this.store.startProcess(m.pid);
        if (restarted) {
          this.entries = [];
          this.reports.clear();
          this.shown = null;
        }
        // The kernel's list is the session's history (also after a page reload).
        const known = new Set(this.entries.map(e => e.id));
        this.entries.push(...m.reports.filter(e => !known.has(e.id)));
        this.armed = m.armed;
        this._fetchShown();
        this._emit();
        return;
      }
      case 'monitor.status':
        this.store.setStatus(m);
        this._emit();
        return;
      case 'tick':
        this.store.add(m.tick);
        this._emit(true);
        return;
      case 'ticks':
        m.ticks.forEach(t => this.store.add(t));
        this._emit(true);
        return;
      case 'cell':
        this.store.cell(m);
        this._emit(true);
        return;
      case 'progress':
        if (this.activity && this.activity.request === m.request) {
          this.activity = {
            ...this.activity,
            stage: m.stage,
            fraction: m.fraction
          };
          this._emit();
        }
        return;
      case 'report': {
        const fetched = m.request?.startsWith('report.get') ?? false;
        this.reports.set(m.entry.id, m.report);
        if (!this.entries.some(e => e.id === m.entry.id)) {
          this.entries.push(m.entry);
        }
        while (this.entries.length > MAX_REPORTS) {
          const gone = this.entries.shift();
          if (gone) {
            this.reports.delete(gone.id);
          }
        }
        if (!fetched) {
          this.shown = null; // a new report: show the newest
        }
        if (this.activity && this.activity.request === m.request) {
          this.activity = null;
        }
        this._emit();
        return;
      }
      case 'watch.status':
        this.armed = m.armed;
        this._emit();
        return;
      case 'error':
        if (this.activity && this.activity.request === m.request) {
          this.activity = null;
        }
        this.notice = { kind: 'error', text: m.message };
        this._emit();
        return;
    }
  }
}
