import { describe, expect, it } from 'vitest';
import type { MonitorStatusMsg, Tick } from './messages';
import { MonitorStore } from './store';

const tick = (t: number, util = 50, gpus = [0]): Tick => ({
  t,
  gpus: gpus.map(gpu => ({ gpu, util_pct: util + gpu })),
  host: { host_cpu_pct: 20, host_mem_pct: 30, host_mem_used_bytes: 1e9 }
});

describe('MonitorStore', () => {
  it('keeps a ring per GPU and one for the host', () => {
    const s = new MonitorStore(100);
    s.add(tick(1, 10, [0, 1]));
    s.add(tick(2, 20, [0, 1]));
    expect([...s.gpus.keys()]).toEqual([0, 1]);
    expect(Array.from(s.gpus.get(1)!.column('util'))).toEqual([11, 21]);
    expect(Array.from(s.host.column('cpu'))).toEqual([20, 20]);
    expect(s.received).toBe(2);
    expect(s.lastT).toBe(2);
  });

  it('skips a tick not newer than the newest held (a resent backlog)', () => {
    const s = new MonitorStore(100);
    expect(s.add(tick(1))).toBe(true);
    expect(s.add(tick(2))).toBe(true);
    expect(s.add(tick(2))).toBe(false);
    expect(s.add(tick(1.5))).toBe(false);
    expect(s.host.size).toBe(2);
  });

  it('pairs cell starts with ends, and keeps an end without a start', () => {
    const s = new MonitorStore(100);
    s.cell({ type: 'cell', event: 'start', t: 1 });
    expect(s.cells).toEqual([
      { start: 1, end: null, executionCount: null, success: null }
    ]);
    s.cell({
      type: 'cell',
      event: 'end',
      t: 3,
      execution_count: 4,
      success: false
    });
    expect(s.cells[0]).toEqual({
      start: 1,
      end: 3,
      executionCount: 4,
      success: false
    });
    s.cell({
      type: 'cell',
      event: 'end',
      t: 5,
      execution_count: 5,
      success: true
    });
    expect(s.cells[1]).toMatchObject({ start: 5, end: 5 });
  });

  it('bounds the cell marks', () => {
    const s = new MonitorStore(100);
    for (let i = 0; i < 800; i++) {
      s.cell({ type: 'cell', event: 'start', t: i });
    }
    expect(s.cells.length).toBe(500);
    expect(s.cells[0].start).toBe(300);
  });

  it('starts a new history for a new kernel process, not for the same one', () => {
    const s = new MonitorStore(100);
    s.startProcess(11);
    s.add(tick(5));
    s.setStatus({ type: 'monitor.status' } as MonitorStatusMsg);
    s.startProcess(11);
    expect(s.host.size).toBe(1);
    s.startProcess(12);
    expect(s.host.size).toBe(0);
    expect(s.gpus.size).toBe(0);
    expect(s.lastT).toBeNull();
    expect(s.status).toBeNull();
    expect(s.add(tick(0.1))).toBe(true); // the new process' clock starts again near 0
  });

  it('resizes every ring', () => {
    const s = new MonitorStore(100);
    for (let i = 0; i < 100; i++) {
      s.add(tick(i));
    }
    s.resize(60);
    expect(s.capacity).toBe(60);
    expect(s.host.size).toBe(60);
    expect(s.gpus.get(0)!.capacity).toBe(60);
    expect(s.gpus.get(0)!.at(0, 't')).toBe(40);
  });
});
