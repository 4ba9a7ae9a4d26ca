// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';
import {
  renderSpeedups,
  speedupRows,
  speedupScale,
  speedupsTitle
} from './speedups';

const whatIfs = [
  {
    change: 'pin_memory=True',
    before_ms: 84.2,
    after_ms: 59.7,
    speedup: 1.41,
    noise_pct: 2
  },
  {
    change: 'channels_last',
    before_ms: 84.2,
    after_ms: 86.0,
    speedup: 0.98,
    noise_pct: 3
  },
  {
    change: 'batch 512',
    before_ms: 84.2,
    after_ms: null,
    speedup: null,
    skipped: 'OOM'
  }
];

describe('speedupRows', () => {
  it('turns the noise band into a speedup band', () => {
    const rows = speedupRows(whatIfs);
    expect(rows[0].band?.[0]).toBeCloseTo(1.41 * 0.98, 6);
    expect(rows[0].band?.[1]).toBeCloseTo(1.41 * 1.02, 6);
    expect(rows[0].text).toBe('1.41× (±2% noise): 84.2 ms → 59.7 ms per step');
    expect(rows[2].skipped).toBe('OOM');
  });
});

describe('renderSpeedups', () => {
  it('draws bars from 1× with whiskers, leftwards for a slowdown', () => {
    const el = document.createElement('div');
    const rows = speedupRows(whatIfs);
    renderSpeedups(el, rows, { width: 500, color: () => 'green' });
    const x = speedupScale(rows, 500);
    const bars = [...el.querySelectorAll('rect.jp-GpusightSpeedupsChart-bar')];
    expect(bars.length).toBe(2);
    expect(Number(bars[0].getAttribute('x'))).toBeCloseTo(x(1), 6);
    expect(Number(bars[0].getAttribute('width'))).toBeCloseTo(
      x(1.41) - x(1),
      6
    );
    // The slowdown ends at 0.98× and runs to 1×.
    expect(Number(bars[1].getAttribute('x'))).toBeCloseTo(x(0.98), 6);
    const whiskers = [
      ...el.querySelectorAll('path.jp-GpusightSpeedupsChart-whisker')
    ];
    expect(whiskers.length).toBe(2);
    expect(whiskers[0].getAttribute('d')).toContain(`M${x(1.41 * 0.98)},`);
    const labels = [
      ...el.querySelectorAll('text.jp-GpusightSpeedupsChart-label')
    ].map(t => t.textContent);
    expect(labels[2]).toBe('batch 512: skipped: OOM');
  });
});

describe('huge noise', () => {
  const noisy = [
    {
      change: 'inference_mode',
      before_ms: 61,
      after_ms: 10,
      speedup: 6.12,
      noise_pct: 340
    },
    {
      change: 'pin_memory=True',
      before_ms: 84.2,
      after_ms: 59.7,
      speedup: 1.41,
      noise_pct: 2
    }
  ];

  it('calls a gain whose band includes 1× not significant', () => {
    const rows = speedupRows(noisy);
    expect(rows[0].significant).toBe(false);
    expect(rows[0].text).toContain('not significant');
    expect(rows[1].significant).toBe(true);
    expect(rows[1].text).not.toContain('not significant');
  });

  it('keeps the axis on the speedups and every mark inside the frame', () => {
    const el = document.createElement('div');
    const width = 400;
    const rows = speedupRows(noisy);
    renderSpeedups(el, rows, { width, color: () => 'grey' });
    const x = speedupScale(rows, width);
    // The domain stops at twice the largest speedup, not at 6.12 × 4.4 = 27×, and never below 0×.
    expect(x.domain()[0]).toBeGreaterThanOrEqual(0);
    expect(x.domain()[1]).toBeLessThanOrEqual(6.12 * 2 * 1.1);
    const whisker = el.querySelector('path.jp-GpusightSpeedupsChart-whisker');
    expect(whisker?.classList.contains('jp-mod-cut')).toBe(true);
    const xs =
      (whisker?.getAttribute('d') ?? '')
        .match(/[MH]-?[\d.]+/g)
        ?.map(s => Number(s.slice(1))) ?? [];
    expect(xs.length).toBeGreaterThan(0);
    for (const v of xs) {
      expect(v).toBeGreaterThanOrEqual(0);
      expect(v).toBeLessThanOrEqual(width);
    }
    for (const bar of el.querySelectorAll('rect')) {
      const left = Number(bar.getAttribute('x'));
      expect(left).toBeGreaterThanOrEqual(0);
      expect(left + Number(bar.getAttribute('width'))).toBeLessThanOrEqual(
        width
      );
    }
  });
});

describe('scope', () => {
  const scoped = [
    {
      change:
        'batch_size=256 instead of 32 with your loader (ms per 32 samples)',
      before_ms: 41.2,
      after_ms: 38.3,
      speedup: 1.08,
      noise_pct: 2,
      params: { compute_only_speedup: 6.3, series_scope: 'compute_only' },
      series: [
        { x: 32, y: 1.6 },
        { x: 1024, y: 0.25 }
      ],
      scope: 'end_to_end' as const
    },
    {
      change: 'torch.autocast',
      before_ms: 1.56,
      after_ms: 1.42,
      speedup: 1.1,
      noise_pct: 1,
      scope: 'compute_only' as const
    }
  ];

  it("says each row's scope after its speedup, and the title what the rows cover", () => {
    const rows = speedupRows(scoped);
    // The row's own end-to-end gain, never its compute-only sweep's 6.3×.
    expect(rows[0].text).toBe(
      '1.08× end to end (±2% noise): 41.2 ms → 38.3 ms'
    );
    expect(rows[0].text).not.toContain('6.3');
    expect(rows[1].text).toBe(
      '1.10× compute only (±1% noise): 1.56 ms → 1.42 ms per step'
    );
    const el = document.createElement('div');
    renderSpeedups(el, rows, { width: 500, color: () => 'green' });
    expect(el.querySelector('svg')?.getAttribute('aria-label')).toBe(
      'What-if speedups, measured end to end or compute only (each row says which)'
    );
    expect(speedupsTitle(rows.slice(1))).toBe(
      'What-if speedups, measured compute only: the model on cached batches'
    );
    // An older report, without scopes, reads as before.
    expect(speedupsTitle(speedupRows(whatIfs))).toBe(
      'What-if speedups, measured'
    );
  });
});
