/**
 * The comm protocol between the sidebar and the kernel (python_pkg/gpusight/jupyter/comm.py),
 * and the guards every kernel message passes before use: a message that fails is dropped (and
 * counted), never half-used. Reports go through the report schema (validateReport).
 */
import { validateReport, type GpusightReport } from '../report';

export const PROTOCOL = 1;
export const COMM_TARGET = 'gpusight';

export type Num = number | null;

export interface GpuReading {
  gpu: number;
  util_pct?: Num;
  mem_used_bytes?: Num;
  power_w?: Num;
  sm_clock_mhz?: Num;
  pcie_rx_bps?: Num;
  pcie_tx_bps?: Num;
}

export interface HostReading {
  /** The kernel process' CPU %, summed over cores (can exceed 100). */
  cpu_pct?: Num;
  host_cpu_pct?: Num;
  host_mem_used_bytes?: Num;
  host_mem_pct?: Num;
}

/** One monitor tick: every GPU's reading and the host's, at `t` s on the kernel's clock. */
export interface Tick {
  t: number;
  gpus: GpuReading[];
  host: HostReading;
}

export interface GpuInfo {
  index: number;
  name: string;
  memory_total_bytes?: Num;
  power_limit_w?: Num;
  sm_clock_max_mhz?: Num;
}

export interface Capabilities {
  check: boolean;
  bench: boolean;
  watch: boolean;
  export: boolean;
}

export interface ReportEntry {
  id: string;
  /**
   * What made it: the panel's own 'check', 'bench', 'watch', or a report the notebook showed
   * ('diagnose', 'inference', ...: the report's kind). A kernel newer than this panel may
   * send others; they are listed by their title.
   */
  origin: string;
  kind: string;
  title: string | null;
  created_at: string;
  summary: string | null;
}

export interface HelloMsg {
  type: 'hello';
  protocol: number;
  version: string;
  python: string;
  executable: string;
  pid: number;
  capabilities: Capabilities;
  reports: ReportEntry[];
  armed: boolean;
}

export interface MonitorStatusMsg {
  type: 'monitor.status';
  running: boolean;
  source: 'nvml' | 'host' | 'none';
  reason: string | null;
  hz: number;
  capacity: number;
  gpus: GpuInfo[];
  t: number;
}

export interface TickMsg {
  type: 'tick';
  tick: Tick;
}

export interface TicksMsg {
  type: 'ticks';
  ticks: Tick[];
}

export interface CellMsg {
  type: 'cell';
  event: 'start' | 'end';
  t: number;
  execution_count?: number | null;
  success?: boolean;
}

export interface ProgressMsg {
  type: 'progress';
  request: string | null;
  stage: string;
  fraction: number | null;
}

export interface ReportMsg {
  type: 'report';
  request: string | null;
  entry: ReportEntry;
  /** Validated against the report schema. */
  report: GpusightReport;
}

export interface WatchStatusMsg {
  type: 'watch.status';
  armed: boolean;
  request: string | null;
}

export interface ErrorMsg {
  type: 'error';
  request: string | null;
  about?: string | null;
  message: string;
}

export type KernelMessage =
  | HelloMsg
  | MonitorStatusMsg
  | TickMsg
  | TicksMsg
  | CellMsg
  | ProgressMsg
  | ReportMsg
  | WatchStatusMsg
  | ErrorMsg;

/** A message that failed its guard, and why (for the console and the panel's counters). */
export interface Rejected {
  ok: false;
  error: string;
}

export type Parsed = { ok: true; message: KernelMessage } | Rejected;

type Obj = Record<string, unknown>;

function isObj(x: unknown): x is Obj {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

const isFiniteNumber = (x: unknown): x is number =>
  typeof x === 'number' && Number.isFinite(x);

const isNum = (x: unknown): boolean =>
  x === undefined || x === null || isFiniteNumber(x);

const isStr = (x: unknown): x is string => typeof x === 'string';

const isStrOrNull = (x: unknown): boolean => x === null || isStr(x);

const isCount = (x: unknown): x is number =>
  typeof x === 'number' && Number.isInteger(x) && x >= 0;

const GPU_FIELDS = [
  'util_pct',
  'mem_used_bytes',
  'power_w',
  'sm_clock_mhz',
  'pcie_rx_bps',
  'pcie_tx_bps'
] as const;

const HOST_FIELDS = [
  'cpu_pct',
  'host_cpu_pct',
  'host_mem_used_bytes',
  'host_mem_pct'
] as const;

/** The monitor sample guard: a tick with finite numbers (or null) where numbers belong. */
export function isTick(x: unknown): x is Tick {
  if (!isObj(x) || !isFiniteNumber(x.t) || !Array.isArray(x.gpus)) {
    return false;
  }
  if (!isObj(x.host) || !HOST_FIELDS.every(f => isNum((x.host as Obj)[f]))) {
    return false;
  }
  return x.gpus.every(
    g => isObj(g) && isCount(g.gpu) && GPU_FIELDS.every(f => isNum(g[f]))
  );
}

function isGpuInfo(x: unknown): x is GpuInfo {
  return (
    isObj(x) &&
    isCount(x.index) &&
    isStr(x.name) &&
    isNum(x.memory_total_bytes) &&
    isNum(x.power_limit_w) &&
    isNum(x.sm_clock_max_mhz)
  );
}

function isEntry(x: unknown): x is ReportEntry {
  return (
    isObj(x) &&
    isStr(x.id) &&
    isStr(x.origin) &&
    isStr(x.kind) &&
    isStrOrNull(x.title ?? null) &&
    isStr(x.created_at) &&
    isStrOrNull(x.summary ?? null)
  );
}

function isCapabilities(x: unknown): x is Capabilities {
  return (
    isObj(x) &&
    ['check', 'bench', 'watch', 'export'].every(k => typeof x[k] === 'boolean')
  );
}

const reject = (error: string): Rejected => ({ ok: false, error });

/** Checks a comm message from the kernel; only what passes reaches the panel. */
export function parseKernelMessage(data: unknown): Parsed {
  if (!isObj(data) || !isStr(data.type)) {
    return reject('not a gpusight message (no type)');
  }
  const d = data;
  const ok = (message: unknown): Parsed => ({
    ok: true,
    message: message as KernelMessage
  });
  const request = d.request ?? null;
  switch (d.type) {
    case 'hello':
      if (
        !isCount(d.protocol) ||
        !isStr(d.version) ||
        !isStr(d.python) ||
        !isStr(d.executable) ||
        !isCount(d.pid) ||
        !isCapabilities(d.capabilities) ||
        !Array.isArray(d.reports) ||
        typeof d.armed !== 'boolean'
      ) {
        return reject('malformed hello');
      }
      // One entry this panel cannot read is skipped, never the kernel's whole hello: the
      // panel still connects and lists the others.
      return ok({ ...d, reports: d.reports.filter(isEntry) });
    case 'monitor.status':
      if (
        typeof d.running !== 'boolean' ||
        !['nvml', 'host', 'none'].includes(d.source as string) ||
        !isStrOrNull(d.reason ?? null) ||
        !isFiniteNumber(d.hz) ||
        !isCount(d.capacity) ||
        !Array.isArray(d.gpus) ||
        !d.gpus.every(isGpuInfo) ||
        !isFiniteNumber(d.t)
      ) {
        return reject('malformed monitor.status');
      }
      return ok({ ...d, reason: d.reason ?? null });
    case 'tick':
      return isTick(d.tick) ? ok(d) : reject('malformed monitor sample');
    case 'ticks':
      return Array.isArray(d.ticks) && d.ticks.every(isTick)
        ? ok(d)
        : reject('malformed monitor samples');
    case 'cell':
      return (d.event === 'start' || d.event === 'end') &&
        isFiniteNumber(d.t) &&
        (d.execution_count === undefined ||
          d.execution_count === null ||
          isCount(d.execution_count))
        ? ok(d)
        : reject('malformed cell mark');
    case 'progress':
      return isStrOrNull(request) &&
        isStr(d.stage) &&
        (d.fraction === null || isFiniteNumber(d.fraction))
        ? ok({ ...d, request })
        : reject('malformed progress');
    case 'report': {
      if (!isStrOrNull(request) || !isEntry(d.entry)) {
        return reject('malformed report message');
      }
      const result = validateReport(d.report);
      if (!result.ok) {
        return reject(`invalid report: ${result.error}`);
      }
      return ok({ ...d, request, report: result.report });
    }
    case 'watch.status':
      return typeof d.armed === 'boolean' && isStrOrNull(request)
        ? ok({ ...d, request })
        : reject('malformed watch.status');
    case 'error':
      return isStrOrNull(request) && isStr(d.message)
        ? ok({ ...d, request })
        : reject('malformed error');
    default:
      return reject(`unknown message type ${JSON.stringify(d.type)}`);
  }
}
