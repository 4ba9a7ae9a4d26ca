/**
 * `<gs-live-monitor>`: the sidebar's live charts for one kernel. GPU utilisation (with the host
 * CPU), memory, power, SM clock and PCIe per GPU; without a GPU, the host's CPU and memory.
 * Cells that ran are shaded on every chart. Give it a MonitorStore and bump `version` to redraw.
 */
import { css, html, nothing } from 'lit';
import { property } from 'lit/decorators.js';
import { formatValue } from '../charts/format';
import { ChartElement } from '../view/chart-element';
import { define } from '../view/define';
import { baseStyles, sectionStyles } from '../view/styles';
import { seriesColor } from '../view/tokens';
import { compact, renderLiveChart, type LiveSeries } from './live-chart';
import type { MonitorStore } from './store';

const GIB = 2 ** 30;
const MB = 1e6;
const CHART_HEIGHT = 84;

interface ChartSpec {
  key: string;
  title: string;
  series: LiveSeries[];
  yMax: number | null;
  yMin?: number;
  format: (v: number) => string;
  /** The newest values, for the heading. */
  now: string;
}

const fmtPct = (v: number) => `${Math.round(v)}%`;
const fmtGiB = (v: number) => `${formatValue(v, '')} GiB`;

function last(values: Float64Array): number {
  for (let i = values.length - 1; i >= 0; i--) {
    if (!Number.isNaN(values[i])) {
      return values[i];
    }
  }
  return NaN;
}

function maxOf(values: (number | null | undefined)[]): number | null {
  const finite = values.filter(
    (v): v is number => typeof v === 'number' && v > 0
  );
  return finite.length ? Math.max(...finite) : null;
}

function scaled(v: Float64Array, by: number): Float64Array {
  return v.map(x => x / by);
}

const show = (v: number, f: (v: number) => string) =>
  Number.isFinite(v) ? f(v) : '–';

/** The charts to draw for what the store holds (pure: tests call it without a DOM). */
export function chartSpecs(store: MonitorStore): ChartSpec[] {
  const gpus = [...store.gpus.entries()].sort((a, b) => a[0] - b[0]);
  const multi = gpus.length > 1;
  const name = (g: number) => (multi ? `GPU ${g}` : 'GPU');
  const hostT = store.host.column('t');
  const hostCpu = store.host.column('cpu');
  const specs: ChartSpec[] = [];
  if (!gpus.length) {
    const memPct = store.host.column('memPct');
    const memUsed = store.host.column('mem');
    specs.push({
      key: 'host-cpu',
      title: 'Host CPU',
      series: [
        {
          key: 'cpu',
          label: 'Host CPU',
          t: hostT,
          v: hostCpu,
          color: seriesColor('cpu')
        }
      ],
      yMax: 100,
      format: fmtPct,
      now: show(last(hostCpu), fmtPct)
    });
    specs.push({
      key: 'host-mem',
      title: 'Host memory',
      series: [
        {
          key: 'mem',
          label: 'Host memory',
          t: hostT,
          v: memPct,
          color: seriesColor('gpu0')
        }
      ],
      yMax: 100,
      format: fmtPct,
      now: `${show(last(memPct), fmtPct)} · ${show(last(memUsed) / GIB, fmtGiB)}`
    });
    return specs;
  }
  const per = (field: 'util' | 'mem' | 'power' | 'sm', by = 1): LiveSeries[] =>
    gpus.map(([g, ring]) => ({
      key: `gpu${g}`,
      label: name(g),
      t: ring.column('t'),
      v: by === 1 ? ring.column(field) : scaled(ring.column(field), by),
      color: seriesColor(`gpu${g}`)
    }));
  const nowOf = (series: LiveSeries[], f: (v: number) => string) =>
    series
      .map(s => `${multi ? `${s.label} ` : ''}${show(last(s.v), f)}`)
      .join(' · ');

  const util = per('util');
  specs.push({
    key: 'util',
    title: 'Utilisation',
    series: [
      ...util,
      {
        key: 'cpu',
        label: 'Host CPU',
        t: hostT,
        v: hostCpu,
        color: seriesColor('cpu'),
        dashed: true
      }
    ],
    yMax: 100,
    format: fmtPct,
    now: nowOf(util, fmtPct)
  });
  const mem = per('mem', GIB);
  const memTotal = maxOf(store.gpuInfo.map(g => g.memory_total_bytes));
  specs.push({
    key: 'mem',
    title: 'Memory',
    series: mem,
    yMax: memTotal ? memTotal / GIB : null,
    format: fmtGiB,
    now:
      nowOf(mem, fmtGiB) +
      (memTotal && !multi ? ` of ${fmtGiB(memTotal / GIB)}` : '')
  });
  const power = per('power');
  specs.push({
    key: 'power',
    title: 'Power',
    series: power,
    yMax: maxOf(store.gpuInfo.map(g => g.power_limit_w)),
    yMin: 50,
    format: v => `${Math.round(v)} W`,
    now: nowOf(power, v => `${Math.round(v)} W`)
  });
  const sm = per('sm');
  specs.push({
    key: 'sm',
    title: 'SM clock',
    series: sm,
    yMax: maxOf(store.gpuInfo.map(g => g.sm_clock_max_mhz)),
    yMin: 100,
    format: v => `${Math.round(v)}`,
    now: nowOf(sm, v => `${Math.round(v)} MHz`)
  });
  const pcie: LiveSeries[] = [];
  for (const [g, ring] of gpus) {
    const t = ring.column('t');
    for (const [field, dir] of [
      ['rx', 'rx'],
      ['tx', 'tx']
    ] as const) {
      const c = compact(t, scaled(ring.column(field), MB));
      pcie.push({
        key: `gpu${g}-${dir}`,
        label: `${name(g)} ${dir === 'rx' ? 'to GPU' : 'from GPU'}`,
        ...c,
        color: seriesColor(`gpu${g}`),
        dashed: dir === 'tx'
      });
    }
  }
  specs.push({
    key: 'pcie',
    title: 'PCIe',
    series: pcie,
    yMax: null,
    yMin: 1,
    format: v =>
      v >= 1000 ? `${formatValue(v / 1000, '')}G` : `${Math.round(v)}M`,
    now: nowOf(
      pcie.filter(s => !s.dashed),
      v => `${formatValue(v, 'MB/s')} in`
    )
  });
  return specs;
}

export class GsLiveMonitor extends ChartElement {
  static override styles = [
    baseStyles,
    sectionStyles,
    css`
      .jp-GpusightLive-chart {
        margin: 0 0 6px;
      }
      .jp-GpusightLive-heading {
        display: flex;
        justify-content: space-between;
        gap: 8px;
        margin: 0;
      }
      .jp-GpusightLive-heading h4 {
        margin: 0;
      }
      .jp-GpusightLive-now {
        color: var(--jp-ui-font-color2);
        font-variant-numeric: tabular-nums;
        text-align: right;
      }
      .jp-GpusightLive-empty {
        color: var(--jp-ui-font-color2);
        padding: 8px 0;
      }
      .jp-GpusightLiveChart-line {
        stroke-width: 1.25px;
      }
      .jp-GpusightLiveChart-line.jp-mod-dashed {
        stroke-dasharray: 3 2;
      }
      .jp-GpusightLiveChart-cell {
        fill: var(--jp-layout-color3);
        opacity: 0.45;
      }
      .jp-GpusightLiveChart-cell.jp-mod-running {
        fill: var(--jp-brand-color3);
      }
    `
  ];

  @property({ attribute: false }) store: MonitorStore | null = null;
  /** Bump to redraw (the store is mutated in place). */
  @property({ type: Number }) version = 0;
  /** Seconds of history shown (the newest at the right edge). */
  @property({ type: Number }) windowS = 60;

  private _specs: ChartSpec[] = [];

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightLive');
  }

  protected override willUpdate(): void {
    this._specs = this.store ? chartSpecs(this.store) : [];
  }

  protected override render() {
    const store = this.store;
    if (!store || store.host.size === 0) {
      return html`<div class="jp-GpusightLive-empty">
        Waiting for samples…
      </div>`;
    }
    return html`${this._specs.map(
      s =>
        html`<section
          class="jp-GpusightLive-chart"
          data-chart=${s.key}
          aria-label=${s.title}
        >
          <div class="jp-GpusightLive-heading">
            <h4>${s.title}</h4>
            <span class="jp-GpusightLive-now">${s.now || nothing}</span>
          </div>
          <div
            class="jp-GpusightLive-host jp-GpusightChart-host"
            data-host=${s.key}
          ></div>
        </section>`
    )}`;
  }

  protected drawCharts(): void {
    const store = this.store;
    if (!store || store.host.size === 0) {
      return;
    }
    const t1 = store.host.at(-1, 't');
    const t0 = Math.max(t1 - this.windowS, store.host.at(0, 't'));
    for (const spec of this._specs) {
      const host = this.renderRoot.querySelector<HTMLElement>(
        `.jp-GpusightLive-host[data-host="${spec.key}"]`
      );
      if (!host) {
        continue;
      }
      renderLiveChart(host, spec.series, {
        width: this.widthOf(host),
        height: CHART_HEIGHT,
        t0: Math.min(t0, t1 - 1),
        t1,
        yMax: spec.yMax,
        yMin: spec.yMin,
        format: spec.format,
        label: `${spec.title}, live`,
        description: `${spec.title} over the last ${Math.round(t1 - t0)} s: ${spec.now}`,
        cells: store.cells
      });
    }
  }
}

define('gs-live-monitor', GsLiveMonitor);

declare global {
  interface HTMLElementTagNameMap {
    'gs-live-monitor': GsLiveMonitor;
  }
}
