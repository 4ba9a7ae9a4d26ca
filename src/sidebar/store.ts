/**
 * What the live monitor holds for one kernel: a ring per GPU, one for the host, the cell marks,
 * and the sampler's status. Bounded everywhere: `capacity` ticks per ring, MAX_CELLS marks.
 */
import type { CellMsg, GpuInfo, MonitorStatusMsg, Tick } from './messages';
import { NumberRing } from './ring';

export const GPU_FIELDS = [
  't',
  'util',
  'mem',
  'power',
  'sm',
  'rx',
  'tx'
] as const;
export const HOST_FIELDS = ['t', 'proc', 'cpu', 'mem', 'memPct'] as const;
export type GpuField = (typeof GPU_FIELDS)[number];
export type HostField = (typeof HOST_FIELDS)[number];

/** Cell marks kept; older ones fall off (they are off the chart long before). */
export const MAX_CELLS = 500;

/** A cell's run on the kernel clock; `end` is null while it runs. */
export interface CellSpan {
  start: number;
  end: number | null;
  executionCount: number | null;
  success: boolean | null;
}

export class MonitorStore {
  readonly gpus = new Map<number, NumberRing<GpuField>>();
  readonly host: NumberRing<HostField>;
  readonly cells: CellSpan[] = [];
  status: MonitorStatusMsg | null = null;
  /** Kernel process whose clock the samples use; a new process starts a new history. */
  pid: number | null = null;
  /** Ticks received since the panel started following this kernel (never reset; tests read it). */
  received = 0;
  /** Bumped on every change, so views redraw only when something changed. */
  version = 0;
  private _capacity: number;
  private _lastT: number | null = null;

  constructor(capacity: number) {
    this._capacity = capacity;
    this.host = new NumberRing(HOST_FIELDS, capacity);
  }

  get capacity(): number {
    return this._capacity;
  }

  /** Newest sample time held (the `since` of the next monitor.start). */
  get lastT(): number | null {
    return this._lastT;
  }

  get gpuInfo(): GpuInfo[] {
    return this.status?.gpus ?? [];
  }

  /** A tick from the kernel; older than the newest held (a resent backlog) is skipped. */
  add(tick: Tick): boolean {
    if (this._lastT !== null && tick.t <= this._lastT) {
      return false;
    }
    this._lastT = tick.t;
    for (const g of tick.gpus) {
      let ring = this.gpus.get(g.gpu);
      if (!ring) {
        ring = new NumberRing(GPU_FIELDS, this._capacity);
        this.gpus.set(g.gpu, ring);
      }
      ring.push({
        t: tick.t,
        util: g.util_pct,
        mem: g.mem_used_bytes,
        power: g.power_w,
        sm: g.sm_clock_mhz,
        rx: g.pcie_rx_bps,
        tx: g.pcie_tx_bps
      });
    }
    const h = tick.host;
    this.host.push({
      t: tick.t,
      proc: h.cpu_pct,
      cpu: h.host_cpu_pct,
      mem: h.host_mem_used_bytes,
      memPct: h.host_mem_pct
    });
    this.received++;
    this.version++;
    return true;
  }

  cell(msg: CellMsg): void {
    if (msg.event === 'start') {
      this.cells.push({
        start: msg.t,
        end: null,
        executionCount: null,
        success: null
      });
      if (this.cells.length > MAX_CELLS) {
        this.cells.splice(0, this.cells.length - MAX_CELLS);
      }
    } else {
      const open = [...this.cells].reverse().find(c => c.end === null);
      const span =
        open ??
        ({
          start: msg.t,
          end: null,
          executionCount: null,
          success: null
        } as CellSpan);
      span.end = msg.t;
      span.executionCount = msg.execution_count ?? null;
      span.success = msg.success ?? null;
      if (!open) {
        this.cells.push(span);
      }
    }
    this.version++;
  }

  setStatus(status: MonitorStatusMsg): void {
    this.status = status;
    this.version++;
  }

  /** A new kernel process (restart): its clock starts again at 0, so the history goes. */
  startProcess(pid: number): void {
    if (this.pid !== null && this.pid !== pid) {
      this.clear();
    }
    this.pid = pid;
  }

  resize(capacity: number): void {
    if (capacity === this._capacity) {
      return;
    }
    this._capacity = capacity;
    this.host.resize(capacity);
    for (const ring of this.gpus.values()) {
      ring.resize(capacity);
    }
    this.version++;
  }

  clear(): void {
    this.gpus.clear();
    this.host.clear();
    this.cells.length = 0;
    this.status = null;
    this._lastT = null;
    this.version++;
  }
}
