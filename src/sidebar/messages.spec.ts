import { describe, expect, it } from 'vitest';
import minimal from '../report/fixtures/minimal-report.json';
import { isTick, parseKernelMessage } from './messages';

const tick = {
  t: 1.5,
  gpus: [{ gpu: 0, util_pct: 97, mem_used_bytes: 1e9, pcie_rx_bps: null }],
  host: {
    cpu_pct: 12,
    host_cpu_pct: 40,
    host_mem_used_bytes: 8e9,
    host_mem_pct: 20
  }
};

const hello = {
  type: 'hello',
  protocol: 1,
  version: '0.1.0',
  python: '3.12.3',
  executable: '/usr/bin/python3',
  pid: 42,
  capabilities: { check: true, bench: true, watch: true, export: false },
  reports: [
    {
      id: 'r1',
      origin: 'check',
      kind: 'check',
      title: null,
      created_at: '2026-01-01T00:00:00+00:00',
      summary: 'fine'
    }
  ],
  armed: false
};

describe('isTick (the monitor sample guard)', () => {
  it('accepts a tick with numbers or null where numbers belong', () => {
    expect(isTick(tick)).toBe(true);
    expect(isTick({ t: 0, gpus: [], host: {} })).toBe(true);
  });

  it.each([
    ['no t', { ...tick, t: undefined }],
    ['t not finite', { ...tick, t: NaN }],
    ['t a string', { ...tick, t: '1.5' }],
    ['gpus not an array', { ...tick, gpus: {} }],
    ['gpu index negative', { ...tick, gpus: [{ gpu: -1 }] }],
    ['gpu index fractional', { ...tick, gpus: [{ gpu: 0.5 }] }],
    ['a reading as text', { ...tick, gpus: [{ gpu: 0, util_pct: '97' }] }],
    ['an infinite reading', { ...tick, gpus: [{ gpu: 0, power_w: Infinity }] }],
    ['no host', { ...tick, host: undefined }],
    ['host reading as an object', { ...tick, host: { host_cpu_pct: {} } }],
    ['an array', [tick]],
    ['null', null]
  ])('rejects %s', (_why, value) => {
    expect(isTick(value)).toBe(false);
  });
});

describe('parseKernelMessage', () => {
  it('accepts each kind of message in its shape', () => {
    const ok = [
      hello,
      {
        type: 'monitor.status',
        running: true,
        source: 'host',
        reason: 'no NVML',
        hz: 5,
        capacity: 3000,
        gpus: [],
        t: 3.2
      },
      { type: 'tick', tick },
      { type: 'ticks', ticks: [tick, { ...tick, t: 2 }] },
      { type: 'cell', event: 'start', t: 1 },
      { type: 'cell', event: 'end', t: 2, execution_count: 3, success: true },
      { type: 'progress', request: 'bench-1', stage: 'matmul', fraction: 0.4 },
      {
        type: 'progress',
        request: 'check-1',
        stage: 'Checking',
        fraction: null
      },
      { type: 'watch.status', armed: true, request: 'watch.arm-2' },
      { type: 'error', request: null, message: 'malformed message' }
    ];
    for (const m of ok) {
      const parsed = parseKernelMessage(m);
      expect(parsed, JSON.stringify(m)).toMatchObject({ ok: true });
    }
  });

  it('validates reports against the report schema', () => {
    const entry = hello.reports[0];
    const good = parseKernelMessage({
      type: 'report',
      request: 'check-1',
      entry,
      report: minimal
    });
    expect(good.ok).toBe(true);
    const bad = parseKernelMessage({
      type: 'report',
      request: 'check-1',
      entry,
      report: { ...minimal, kind: 'haiku' }
    });
    expect(bad).toMatchObject({ ok: false });
    expect(!bad.ok && bad.error).toMatch(/^invalid report: kind/);
    const noEntry = parseKernelMessage({
      type: 'report',
      request: null,
      report: minimal
    });
    expect(noEntry.ok).toBe(false);
  });

  it('skips, never rejects, a hello entry it cannot read, and lists every kind', () => {
    const diagnose = {
      ...hello.reports[0],
      id: 'r2',
      origin: 'diagnose',
      kind: 'diagnose'
    };
    const parsed = parseKernelMessage({
      ...hello,
      reports: [hello.reports[0], { id: 'r9', origin: 'magic' }, diagnose]
    });
    expect(parsed.ok).toBe(true);
    const reports =
      parsed.ok && parsed.message.type === 'hello'
        ? parsed.message.reports
        : [];
    expect(reports.map(e => e.id)).toEqual(['r1', 'r2']);
  });

  it('accepts a diagnose report published by the notebook', () => {
    const parsed = parseKernelMessage({
      type: 'report',
      request: null,
      entry: { ...hello.reports[0], origin: 'diagnose', kind: 'diagnose' },
      report: minimal
    });
    expect(parsed.ok).toBe(true);
  });

  it.each([
    ['no type', { tick }],
    ['hello whose reports are not a list', { ...hello, reports: {} }],
    ['unknown type', { type: 'frobnicate' }],
    ['hello without capabilities', { ...hello, capabilities: undefined }],
    [
      'status with an unknown source',
      { type: 'monitor.status', source: 'rocm' }
    ],
    ['a tick that is not one', { type: 'tick', tick: { ...tick, t: 'now' } }],
    ['ticks with one bad tick', { type: 'ticks', ticks: [tick, { t: 1 }] }],
    ['a cell mark without time', { type: 'cell', event: 'start' }],
    ['a cell mark with an odd event', { type: 'cell', event: 'pause', t: 1 }],
    ['progress without stage', { type: 'progress', request: 'x', fraction: 1 }],
    ['error without message', { type: 'error', request: 'x' }],
    // The panel exports in the browser now: a kernel's file export is no message of its own.
    [
      'an exported file',
      { type: 'exported', request: 'x', report_id: 'r1', path: '/a', name: 'a' }
    ]
  ])('rejects %s', (_why, value) => {
    expect(parseKernelMessage(value).ok).toBe(false);
  });
});
