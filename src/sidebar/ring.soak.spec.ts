/**
 * Soak, time-compressed: an hour of monitor samples at 10 Hz (36,000 ticks) into the store's
 * rings. Size stays at the capacity and the backing arrays are never reallocated. With
 * GPUSIGHT_SOAK_OUT set, the figures are written there (benchmarks/monitor_soak.py).
 */
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Tick } from './messages';
import { MonitorStore } from './store';

const HOUR_AT_10HZ = 36_000;
const CAPACITY = 3000;

function tick(i: number): Tick {
  return {
    t: i / 10,
    gpus: [
      {
        gpu: 0,
        util_pct: i % 100,
        mem_used_bytes: 40e9,
        power_w: 400,
        sm_clock_mhz: 1980,
        pcie_rx_bps: i % 5 === 0 ? 1e9 : null,
        pcie_tx_bps: i % 5 === 0 ? 1e8 : null
      }
    ],
    host: {
      cpu_pct: 100,
      host_cpu_pct: 30,
      host_mem_used_bytes: 8e9,
      host_mem_pct: 12
    }
  };
}

describe('monitor soak: an hour at 10 Hz', () => {
  it('keeps size at capacity and never grows the arrays', () => {
    const store = new MonitorStore(CAPACITY);
    store.add(tick(0));
    const gpuRing = store.gpus.get(0)!;
    const arrays = [...gpuRing.storage, ...store.host.storage];
    const bytes = arrays.reduce((n, a) => n + a.byteLength, 0);
    const heapBefore = process.memoryUsage().heapUsed;
    const began = performance.now();
    for (let i = 1; i < HOUR_AT_10HZ; i++) {
      store.add(tick(i));
      if (i % 600 === 0) {
        store.cell({
          type: 'cell',
          event: i % 1200 ? 'end' : 'start',
          t: i / 10
        });
      }
    }
    const ms = performance.now() - began;
    const heapAfter = process.memoryUsage().heapUsed;

    expect(store.received).toBe(HOUR_AT_10HZ);
    expect(gpuRing.size).toBe(CAPACITY);
    expect(store.host.size).toBe(CAPACITY);
    expect(gpuRing.capacity).toBe(CAPACITY);
    // The very same arrays, at their first length: nothing was reallocated or grown.
    const now = [...gpuRing.storage, ...store.host.storage];
    expect(now.every((a, i) => a === arrays[i] && a.length === CAPACITY)).toBe(
      true
    );
    // The newest hour-end samples are there, the oldest are gone.
    expect(gpuRing.at(-1, 't')).toBeCloseTo(3599.9);
    expect(gpuRing.at(0, 't')).toBeCloseTo((HOUR_AT_10HZ - CAPACITY) / 10);
    expect(store.cells.length).toBeLessThanOrEqual(500);

    const out = process.env.GPUSIGHT_SOAK_OUT;
    if (out) {
      writeFileSync(
        out,
        JSON.stringify(
          {
            ticks: HOUR_AT_10HZ,
            capacity: CAPACITY,
            ring_size_after: gpuRing.size,
            ring_bytes: bytes,
            arrays_reallocated: false,
            heap_delta_bytes: heapAfter - heapBefore,
            ingest_ms: Math.round(ms * 10) / 10,
            node: process.version
          },
          null,
          2
        )
      );
    }
  });
});
