/**
 * The bridge to one kernel: imports gpusight there silently, opens the `gpusight` comm, and
 * keeps it open across kernel restarts. A small state machine:
 *
 *   idle ──setKernel──► connecting ──hello──► ready
 *                          │  ├─ ImportError ─► missing   (how to install gpusight *there*)
 *                          │  ├─ not Python ──► unsupported
 *                          │  └─ other ───────► failed
 *   ready/any ──status restarting──► restarting ──starting/idle/busy, or kernelChanged──► connecting
 *             ──status dead────────► dead
 *
 * Every async step carries a generation number: a result that arrives after the kernel changed
 * or restarted is dropped instead of overwriting the newer state.
 */
import type { Kernel, KernelMessage as KM } from '@jupyterlab/services';
import type { JSONObject, JSONValue } from '@lumino/coreutils';
import {
  COMM_TARGET,
  PROTOCOL,
  parseKernelMessage,
  type HelloMsg,
  type KernelMessage
} from './messages';

/** Registers the comm target; an ImportError here means gpusight is not in the kernel. */
export const IMPORT_CODE =
  '__import__("gpusight.jupyter.comm", fromlist=["register_target"]).register_target()';
/** Evaluated as a user expression: where to `pip install` for this kernel. */
export const EXECUTABLE_EXPR = '__import__("sys").executable';

export type MissingReason = 'absent' | 'outdated' | 'broken';

export type BridgeState =
  | { kind: 'idle' }
  | { kind: 'connecting' }
  | { kind: 'ready'; hello: HelloMsg }
  | {
      kind: 'missing';
      reason: MissingReason;
      executable: string | null;
      error: string;
    }
  | { kind: 'unsupported'; language: string }
  | { kind: 'restarting' }
  | { kind: 'dead' }
  | { kind: 'failed'; error: string };

/** What the monitor wants from the kernel; the bridge (re)sends it whenever it connects. */
export interface MonitorWish {
  on: boolean;
  hz: number;
  capacity: number;
}

/** The part of a kernel connection the bridge uses (tests pass a fake). */
export type BridgeKernel = Pick<
  Kernel.IKernelConnection,
  | 'id'
  | 'name'
  | 'info'
  | 'status'
  | 'connectionStatus'
  | 'requestExecute'
  | 'createComm'
  | 'reconnect'
>;

/**
 * How long a connection after a restart may wait for its first reply before the bridge asks
 * JupyterLab to reconnect. JupyterLab 4.6 can leave every request sent during a restart in its
 * queue (its own cells too) until the websocket reconnects; "Kernel > Reconnect to Kernel"
 * flushes them, and so does this, once per restart.
 */
export const RESTART_NUDGE_MS = 5000;

export interface BridgeOptions {
  onState?: (state: BridgeState) => void;
  /** Every message that passed its guard, in arrival order. */
  onMessage?: (message: KernelMessage) => void;
  /** The newest sample time the panel holds (so the kernel sends only what is missing). */
  since?: () => number | null;
  /** Tests shorten it; see RESTART_NUDGE_MS. */
  restartNudgeMs?: number;
}

/** Python's repr of a str -> the str ('/usr/bin/python3' or "C:\\Python\\python.exe"). */
export function parsePyStr(repr: string): string | null {
  const s = repr.trim();
  const q = s[0];
  if (s.length < 2 || (q !== "'" && q !== '"') || s[s.length - 1] !== q) {
    return null;
  }
  return s.slice(1, -1).replace(/\\(.)/g, (_m, c: string) => c);
}

/** Quotes a path for a POSIX shell when it needs it. */
export function shellQuote(path: string): string {
  return /^[\w@%+=:,./-]+$/.test(path)
    ? path
    : `'${path.replace(/'/g, `'\\''`)}'`;
}

/** The command that installs gpusight into the kernel's own environment. */
export function installCommand(executable: string | null): string {
  return `${executable ? shellQuote(executable) : 'python'} -m pip install gpusight`;
}

/** ImportError text -> whether gpusight is absent, too old for the sidebar, or broken. */
export function classifyImportError(
  ename: string,
  evalue: string
): MissingReason | null {
  if (ename !== 'ModuleNotFoundError' && ename !== 'ImportError') {
    return null;
  }
  if (/No module named '?gpusight'?$/.test(evalue.trim())) {
    return 'absent';
  }
  if (/No module named '?gpusight\./.test(evalue)) {
    return 'outdated';
  }
  return 'broken';
}

export class KernelBridge {
  private _state: BridgeState = { kind: 'idle' };
  private _kernel: BridgeKernel | null = null;
  private _comm: Kernel.IComm | null = null;
  private _gen = 0;
  private _requests = 0;
  private _wish: MonitorWish = { on: false, hz: 5, capacity: 3000 };
  private _sentWish: string | null = null;
  private _disposed = false;
  /** Set by a restart, cleared by the first reply: the next connect may need a nudge. */
  private _afterRestart = false;
  /** Times the bridge asked JupyterLab to reconnect a stuck restart (tests read it). */
  nudges = 0;
  /** Successful connections (hello received), across restarts. */
  connects = 0;
  /** Kernel messages that failed their guard. */
  rejected = 0;

  constructor(private readonly _opts: BridgeOptions = {}) {}

  get state(): BridgeState {
    return this._state;
  }

  get kernel(): BridgeKernel | null {
    return this._kernel;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  get monitorWish(): MonitorWish {
    return { ...this._wish };
  }

  /** Follow this kernel (null: none). The same kernel again does nothing unless it is down. */
  setKernel(kernel: BridgeKernel | null): void {
    if (this._disposed) {
      return;
    }
    // The same kernel again: SessionContext says so after a restart (kernelChanged with the
    // same connection), the one sure sign that the restart is over.
    const down =
      this._state.kind === 'failed' || this._state.kind === 'restarting';
    if (kernel === this._kernel && kernel !== null && !down) {
      return;
    }
    this._closeComm(true);
    this._kernel = kernel;
    if (!kernel) {
      this._gen++;
      this._setState({ kind: 'idle' });
      return;
    }
    void this._connect();
  }

  /** Feed the kernel's status (sessionContext.statusChanged): restarts drop and reopen the comm. */
  kernelStatus(status: Kernel.Status): void {
    console.debug(`gpusight bridge: kernel ${status} (${this._state.kind})`);
    if (this._disposed || !this._kernel) {
      return;
    }
    if (status === 'restarting' || status === 'autorestarting') {
      this._afterRestart = true;
      this._gen++;
      this._closeComm(false);
      this._setState({ kind: 'restarting' });
      return;
    }
    if (status === 'dead') {
      this._gen++;
      this._closeComm(false);
      this._setState({ kind: 'dead' });
      return;
    }
    if (status === 'terminating' || status === 'unknown') {
      return;
    }
    // Any sign of life after a restart (starting, idle, busy) reconnects. JupyterLab does not
    // track the status messages that answer kernel_info, so 'idle' may never come; what is
    // sent before the restart is over waits in the connection's queue.
    const down =
      this._state.kind === 'restarting' ||
      this._state.kind === 'dead' ||
      (this._state.kind === 'ready' &&
        (this._comm === null || this._comm.isDisposed));
    if (down) {
      void this._connect();
    }
  }

  /** Connect again (the panel's Retry button, or after installing gpusight). */
  retry(): void {
    if (this._kernel && !this._disposed) {
      this._closeComm(true);
      void this._connect();
    }
  }

  /** Start, stop or re-rate the kernel's sampler; applied now if connected, else on connect. */
  setMonitor(wish: MonitorWish): void {
    this._wish = { ...wish };
    this._sendWish(false);
  }

  /** Sends a request; returns its id, or null when not connected. */
  request(type: string, payload: JSONObject = {}): string | null {
    const id = `${type}-${++this._requests}`;
    return this.send({ type, request: id, ...payload }) ? id : null;
  }

  /** Sends a message on the comm; false when not connected. */
  send(message: JSONObject): boolean {
    const comm = this._comm;
    if (this._state.kind !== 'ready' || !comm || comm.isDisposed) {
      return false;
    }
    try {
      const future = comm.send(message as JSONValue);
      future.done.catch(() => undefined);
      return true;
    } catch (reason) {
      console.warn('gpusight: could not send to the kernel', reason);
      return false;
    }
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._closeComm(true);
    this._gen++;
    this._disposed = true;
    this._kernel = null;
  }

  // --- internals ------------------------------------------------------------------------

  private _setState(state: BridgeState): void {
    console.debug(`gpusight bridge: ${this._state.kind} -> ${state.kind}`);
    this._state = state;
    this._opts.onState?.(state);
  }

  private _closeComm(sendClose: boolean): void {
    const comm = this._comm;
    this._comm = null;
    this._sentWish = null;
    if (comm && !comm.isDisposed) {
      comm.onMsg = () => undefined;
      comm.onClose = () => undefined;
      if (sendClose) {
        try {
          comm.close();
        } catch {
          // The kernel is gone already; there is nothing left to tell it.
        }
      }
    }
  }

  private async _connect(): Promise<void> {
    const kernel = this._kernel;
    if (!kernel) {
      return;
    }
    const gen = ++this._gen;
    const stale = () => gen !== this._gen || this._disposed;
    this._setState({ kind: 'connecting' });
    try {
      const info = await kernel.info;
      if (stale()) {
        return;
      }
      const language = info.language_info?.name ?? 'unknown';
      if (language.toLowerCase() !== 'python') {
        this._setState({ kind: 'unsupported', language });
        return;
      }
      const nudge = this._afterRestart ? this._nudgeLater(kernel, gen) : null;
      const reply = await this._execute(kernel, IMPORT_CODE);
      if (nudge !== null) {
        clearTimeout(nudge);
      }
      if (stale()) {
        return;
      }
      this._afterRestart = false;
      if (reply.status === 'error') {
        const err = reply as KM.IReplyErrorContent;
        const reason = classifyImportError(err.ename, err.evalue);
        const error = `${err.ename}: ${err.evalue}`;
        if (!reason) {
          this._setState({ kind: 'failed', error });
          return;
        }
        const executable = await this._executable(kernel);
        if (stale()) {
          return;
        }
        this._setState({ kind: 'missing', reason, executable, error });
        return;
      }
      if (reply.status !== 'ok') {
        this._setState({ kind: 'failed', error: `import ${reply.status}` });
        return;
      }
      this._openComm(kernel, gen);
    } catch (reason) {
      if (!stale()) {
        this._setState({ kind: 'failed', error: String(reason) });
      }
    }
  }

  /** After a restart: if the import has no answer in time, reconnect the websocket once. */
  private _nudgeLater(
    kernel: BridgeKernel,
    gen: number
  ): ReturnType<typeof setTimeout> {
    return setTimeout(() => {
      const stuck =
        gen === this._gen &&
        !this._disposed &&
        this._afterRestart &&
        this._state.kind === 'connecting' &&
        kernel.connectionStatus === 'connected' &&
        kernel.status !== 'busy';
      if (stuck) {
        this._afterRestart = false;
        this.nudges++;
        console.info(
          'gpusight: no reply from the restarted kernel; reconnecting (JupyterLab kept the requests queued).'
        );
        kernel.reconnect().catch(() => undefined);
      }
    }, this._opts.restartNudgeMs ?? RESTART_NUDGE_MS);
  }

  private async _execute(
    kernel: BridgeKernel,
    code: string,
    userExpressions: JSONObject = {}
  ): Promise<KM.IExecuteReplyMsg['content']> {
    // silent: no output, no execution count, no pre/post_run_cell hooks in the kernel.
    const future = kernel.requestExecute({
      code,
      silent: true,
      store_history: false,
      user_expressions: userExpressions,
      allow_stdin: false,
      stop_on_error: false
    });
    const reply = await future.done;
    return reply.content;
  }

  private async _executable(kernel: BridgeKernel): Promise<string | null> {
    try {
      const reply = await this._execute(kernel, '', {
        executable: EXECUTABLE_EXPR
      });
      if (reply.status !== 'ok') {
        return null;
      }
      const expr = (reply as KM.IExecuteReply).user_expressions?.executable as
        { status?: string; data?: Record<string, unknown> } | undefined;
      const text =
        expr?.status === 'ok' ? expr.data?.['text/plain'] : undefined;
      return typeof text === 'string' ? parsePyStr(text) : null;
    } catch {
      return null;
    }
  }

  private _openComm(kernel: BridgeKernel, gen: number): void {
    const comm = kernel.createComm(COMM_TARGET);
    this._comm = comm;
    comm.onMsg = msg => {
      if (gen === this._gen) {
        this._receive(msg.content.data);
      }
    };
    comm.onClose = () => {
      // The kernel closed it: the target is gone (an old gpusight) or the kernel shut it.
      if (gen === this._gen && this._comm === comm) {
        this._comm = null;
        this._setState({
          kind: 'failed',
          error: 'the kernel closed the gpusight comm'
        });
      }
    };
    comm
      .open({ type: 'hello', protocol: PROTOCOL })
      .done.catch(() => undefined);
  }

  private _receive(data: unknown): void {
    const parsed = parseKernelMessage(data);
    if (!parsed.ok) {
      this.rejected++;
      console.warn(`gpusight: dropped a kernel message: ${parsed.error}`);
      return;
    }
    const message = parsed.message;
    if (message.type === 'hello') {
      this.connects++;
      this._setState({ kind: 'ready', hello: message });
      this._opts.onMessage?.(message);
      this._sendWish(true);
      return;
    }
    this._opts.onMessage?.(message);
  }

  private _sendWish(force: boolean): void {
    if (this._state.kind !== 'ready') {
      return;
    }
    const w = this._wish;
    const key = JSON.stringify(w);
    if (!force && key === this._sentWish) {
      return;
    }
    // A fresh connection with the monitor off needs no message: the kernel's sampler is idle.
    if (force && !w.on) {
      this._sentWish = key;
      return;
    }
    const sent = w.on
      ? this.send({
          type: 'monitor.start',
          hz: w.hz,
          capacity: w.capacity,
          since: this._opts.since?.() ?? null
        })
      : this.send({ type: 'monitor.stop' });
    if (sent) {
      this._sentWish = key;
    }
  }
}
