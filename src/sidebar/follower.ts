/**
 * Which kernel the sidebar shows: the one of the notebook or console the user works in now.
 * Follows the shell's current widget (ILabShell.currentChanged) and the trackers; clicking into
 * the file browser or a terminal keeps the last notebook, as the debugger sidebar does.
 */
import type { ILabShell } from '@jupyterlab/application';
import type { ISessionContext } from '@jupyterlab/apputils';
import type { IConsoleTracker } from '@jupyterlab/console';
import type { INotebookTracker } from '@jupyterlab/notebook';
import type { Widget } from '@lumino/widgets';

export interface FollowTarget {
  kind: 'notebook' | 'console';
  widget: Widget;
  sessionContext: ISessionContext;
  /** The document's path now (it follows renames; the session's path can lag). */
  path: () => string;
}

export interface FollowerOptions {
  labShell: ILabShell | null;
  notebooks: INotebookTracker | null;
  consoles: IConsoleTracker | null;
  onChange: (target: FollowTarget | null) => void;
}

export class ActiveKernelFollower {
  private _target: FollowTarget | null = null;
  private _disposed = false;

  constructor(private readonly _opts: FollowerOptions) {
    const { labShell, notebooks, consoles } = _opts;
    labShell?.currentChanged.connect(this._onShellCurrent, this);
    notebooks?.currentChanged.connect(this._onTrackerCurrent, this);
    consoles?.currentChanged.connect(this._onTrackerCurrent, this);
    if (!this._consider(labShell?.currentWidget ?? null)) {
      this._fallback();
    }
  }

  get target(): FollowTarget | null {
    return this._target;
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    const { labShell, notebooks, consoles } = this._opts;
    labShell?.currentChanged.disconnect(this._onShellCurrent, this);
    notebooks?.currentChanged.disconnect(this._onTrackerCurrent, this);
    consoles?.currentChanged.disconnect(this._onTrackerCurrent, this);
  }

  /** The notebook or console that `widget` is, if any. */
  private _targetOf(widget: Widget | null): FollowTarget | null {
    if (!widget || widget.isDisposed) {
      return null;
    }
    const { notebooks, consoles } = this._opts;
    const nb = notebooks?.find(w => w === widget);
    if (nb) {
      return {
        kind: 'notebook',
        widget: nb,
        sessionContext: nb.sessionContext,
        path: () => nb.context.path
      };
    }
    const console_ = consoles?.find(w => w === widget);
    if (console_) {
      return {
        kind: 'console',
        widget: console_,
        sessionContext: console_.sessionContext,
        path: () => console_.sessionContext.path
      };
    }
    return null;
  }

  /** Follows `widget` if it is a notebook or console; returns whether it did. */
  private _consider(widget: Widget | null): boolean {
    const target = this._targetOf(widget);
    if (!target) {
      return false;
    }
    this._set(target);
    return true;
  }

  private _fallback(): void {
    const { notebooks, consoles } = this._opts;
    const widget = notebooks?.currentWidget ?? consoles?.currentWidget ?? null;
    this._set(this._targetOf(widget));
  }

  private _set(target: FollowTarget | null): void {
    if (target?.widget === this._target?.widget) {
      return;
    }
    this._target?.widget.disposed.disconnect(this._onDisposed, this);
    this._target = target;
    target?.widget.disposed.connect(this._onDisposed, this);
    this._opts.onChange(target);
  }

  private _onShellCurrent(_: ILabShell, args: ILabShell.IChangedArgs): void {
    this._consider(args.newValue);
  }

  private _onTrackerCurrent(_: unknown, widget: Widget | null): void {
    // Without ILabShell (another shell), the trackers are all we have; with it, the shell's
    // current widget is the better signal, but a tracker change to a widget counts too.
    if (widget) {
      this._consider(widget);
    }
  }

  private _onDisposed(): void {
    this._target = null;
    this._fallback();
    if (!this._target) {
      this._opts.onChange(null);
    }
  }
}
