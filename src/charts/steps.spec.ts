// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';
import { approxTextWidth } from './frame';
import {
  drawnCaption,
  phaseCaption,
  readPhases,
  readStall,
  renderSteps,
  stallCaption,
  stalledSteps,
  stepTips
} from './steps';

describe('step-time strip', () => {
  const times = Array.from({ length: 40 }, (_, i) => (i % 8 === 5 ? 150 : 20));

  it('finds the stalled phase of a period', () => {
    expect(stalledSteps(times, 8)).toEqual([5, 13, 21, 29, 37]);
    expect(stalledSteps(times.slice(0, 3), 8)).toEqual([]);
  });

  it('reads run.stall defensively', () => {
    expect(readStall({})).toBeNull();
    expect(readStall({ stall: { period_steps: 'eight' } })).toBeNull();
    expect(readStall({ stall: { period_steps: 1.5 } })).toBeNull();
    expect(
      readStall({
        stall: {
          period_steps: 8,
          stall_ms: 130,
          share_pct: 40.6,
          cause: 'the DataLoader refills its workers'
        }
      })
    ).toEqual({
      periodSteps: 8,
      stallMs: 130,
      sharePct: 40.6,
      cause: 'the DataLoader refills its workers'
    });
  });

  it('marks the stalled steps and says the period', () => {
    const stall = readStall({
      stall: { period_steps: 8, stall_ms: 130, share_pct: 40.6, cause: 'x' }
    });
    expect(stall && stallCaption(stall)).toBe(
      'Every 8th step stalls: +130 ms (40.6% of the time), x.'
    );
    const el = document.createElement('div');
    renderSteps(el, times, {
      width: 320,
      color: 'blue',
      stallColor: 'orange',
      stall
    });
    const marked = el.querySelector('path.jp-mod-stalled');
    expect(marked?.getAttribute('data-steps')).toBe('5');
    expect((marked?.getAttribute('d') ?? '').match(/M/g)).toHaveLength(5);
    const svg = el.querySelector('svg');
    expect(svg?.getAttribute('width')).toBe('320');
    // Step numbers on x are whole steps, from 1.
    const ticks = [
      ...el.querySelectorAll('g.jp-GpusightChart-axis.jp-mod-x .tick text')
    ].map(t => t.textContent);
    expect(ticks.every(t => /^\d+$/.test(t ?? ''))).toBe(true);
    expect(ticks[0]).toBe('1');
  });

  it('reads run.phases defensively and marks the steps that held one', () => {
    expect(readPhases({})).toEqual([]);
    expect(readPhases({ phases: 'x' })).toEqual([]);
    expect(readPhases({ phases: [{ kind: 'logging', steps: [1] }] })).toEqual(
      []
    );
    expect(readPhases({ phases: [{ kind: 'evaluation', steps: [] }] })).toEqual(
      []
    );
    expect(readPhases({ phases: [{ kind: 'toString', steps: [1] }] })).toEqual(
      []
    );
    const epochs = readPhases({
      phases: [
        {
          kind: 'epoch_start',
          steps: [6, 16],
          times_ms: [420, 422],
          period_steps: 10
        }
      ]
    });
    expect(phaseCaption(epochs[0])).toBe(
      "The DataLoader's workers starting every 10 steps: 421 ms each (steps 7, 17)."
    );
    const phases = readPhases({
      phases: [
        {
          kind: 'evaluation',
          steps: [5, 13, 21],
          times_ms: [120, 130, 140],
          period_steps: 8
        }
      ]
    });
    expect(phases).toEqual([
      { kind: 'evaluation', steps: [5, 13, 21], periodSteps: 8, msEach: 130 }
    ]);
    expect(phaseCaption(phases[0])).toBe(
      'An evaluation every 8 steps: 130 ms each (steps 6, 14, 22).'
    );
    // The same steps also read as a stall: they are drawn once, as the phase.
    const stall = readStall({
      stall: { period_steps: 8, stall_ms: 130, share_pct: 40.6, cause: 'x' }
    });
    const el = document.createElement('div');
    renderSteps(el, times, {
      width: 320,
      color: 'blue',
      stallColor: 'orange',
      stall,
      phaseColor: 'teal',
      phases
    });
    const phase = el.querySelector('path.jp-mod-phase');
    expect(phase?.getAttribute('data-steps')).toBe('3');
    expect((phase?.getAttribute('d') ?? '').match(/M/g)).toHaveLength(3);
    expect(
      el.querySelector('path.jp-mod-stalled')?.getAttribute('data-steps')
    ).toBe('2');
    expect(el.querySelector('svg')?.textContent).toContain(
      'An evaluation every 8 steps'
    );
  });
});

/** A text's box from its baseline `y` at 11 px: 0.8 em above, 0.2 em below. */
function box(x: number, y: number, text: string, anchor: string) {
  const w = approxTextWidth(text, 11);
  const left = anchor === 'middle' ? x - w / 2 : anchor === 'end' ? x - w : x;
  return { left, right: left + w, top: y - 8.8, bottom: y + 2.2 };
}

describe('step axis', () => {
  it.each([
    [250, 8],
    [360, 56],
    [900, 8]
  ])(
    'keeps the Step title clear of every tick label at %i px (%i steps)',
    (width, n) => {
      const times = Array.from({ length: n }, (_, i) => 20 + (i % 7));
      const el = document.createElement('div');
      renderSteps(el, times, {
        width,
        color: 'blue',
        stallColor: 'orange',
        stall: null
      });
      const title = el.querySelector('.jp-GpusightChart-axisLabel.jp-mod-x');
      const t = box(
        Number(title?.getAttribute('x')),
        Number(title?.getAttribute('y')),
        title?.textContent ?? '',
        'middle'
      );
      const height = Number(el.querySelector('svg')?.getAttribute('height'));
      // Inside the frame (the plot starts 8 px down)...
      expect(t.bottom + 8).toBeLessThanOrEqual(height);
      const axis = el.querySelector('g.jp-GpusightChart-axis.jp-mod-x');
      const axisY = Number(
        /translate\(0,([\d.]+)\)/.exec(
          axis?.getAttribute('transform') ?? ''
        )?.[1]
      );
      // ...and below every tick label: d3 draws them 9 px down, 0.71 em to the baseline.
      for (const tick of axis?.querySelectorAll('.tick') ?? []) {
        const tx = Number(
          /translate\(([\d.]+),/.exec(tick.getAttribute('transform') ?? '')?.[1]
        );
        const label = box(
          tx,
          axisY + 9 + 0.71 * 11,
          tick.textContent ?? '',
          'middle'
        );
        const apart =
          label.right < t.left ||
          label.left > t.right ||
          label.bottom + 1 < t.top;
        expect(apart, `tick ${tick.textContent} at ${tx}`).toBe(true);
      }
    }
  );
});

describe('steps legend', () => {
  const times = Array.from({ length: 40 }, (_, i) => (i % 8 === 5 ? 150 : 20));

  it('names the median line and the marked bars', () => {
    const stall = readStall({
      stall: { period_steps: 8, stall_ms: 130, share_pct: 40.6, cause: 'x' }
    });
    const el = document.createElement('div');
    renderSteps(el, times, {
      width: 640,
      color: 'blue',
      stallColor: 'orange',
      stall
    });
    const items = [...el.querySelectorAll('.jp-GpusightStepsChart-legendItem')];
    expect(items.map(i => i.textContent)).toEqual([
      'median 20.0 ms',
      'stalled'
    ]);
    // The median's swatch is drawn as the median line is (same class, so the same dashes).
    expect(
      items[0].querySelector('path.jp-GpusightStepsChart-median')
    ).not.toBeNull();
    expect(items[1].querySelector('rect')?.getAttribute('style')).toContain(
      'orange'
    );
  });

  it('keeps the median entry at 250 px, inside the frame', () => {
    const el = document.createElement('div');
    renderSteps(el, times, {
      width: 250,
      color: 'blue',
      stallColor: 'orange',
      stall: null
    });
    const item = el.querySelector('.jp-GpusightStepsChart-legendItem');
    expect(item?.textContent).toBe('median 20.0 ms');
    const x = Number(
      /translate\(([\d.-]+),/.exec(item?.getAttribute('transform') ?? '')?.[1]
    );
    expect(x + 52).toBeGreaterThanOrEqual(0);
    expect(
      x + 52 + 18 + approxTextWidth('median 20.0 ms', 11)
    ).toBeLessThanOrEqual(250 - 8);
  });
});

describe('step tooltips', () => {
  const times = Array.from({ length: 40 }, (_, i) => (i % 8 === 5 ? 150 : 20));

  it('gives each bar a tooltip with its step, time and mark', () => {
    const stall = readStall({
      stall: { period_steps: 8, stall_ms: 130, share_pct: 40.6, cause: 'x' }
    });
    const el = document.createElement('div');
    renderSteps(el, times, {
      width: 640,
      color: 'blue',
      stallColor: 'orange',
      stall,
      phases: [
        { kind: 'evaluation', steps: [13], periodSteps: null, msEach: 130 }
      ]
    });
    const tips = [...el.querySelectorAll('rect.jp-GpusightStepsChart-tip')];
    expect(tips).toHaveLength(40);
    const text = tips.map(t => t.querySelector('title')?.textContent);
    expect(text[0]).toBe('Step 1: 20.0 ms');
    expect(text[5]).toBe('Step 6: 150 ms (stalled)');
    expect(text[13]).toBe('Step 14: 150 ms (evaluation)');
    // Side by side over the plot, each as wide as its bar.
    expect(Number(tips[1].getAttribute('x'))).toBeCloseTo(580 / 40, 1);
    expect(Number(tips[1].getAttribute('width'))).toBeCloseTo(580 / 40, 1);
  });

  it('groups neighbouring steps when there are more steps than pixels', () => {
    const many = Array.from({ length: 10_000 }, (_, i) => 10 + (i % 100));
    const tips = stepTips(many, 500, () => null);
    expect(tips).toHaveLength(500);
    expect(tips[0]).toEqual({
      from: 0,
      to: 20,
      text: 'Steps 1–20: 10.0 ms to 29.0 ms'
    });
    expect(tips[tips.length - 1].to).toBe(10_000);
  });
});

describe('what the strip counts', () => {
  it('says how many timings it draws when the run counted more steps', () => {
    expect(drawnCaption(8, 56)).toBe(
      '8 timings drawn for 56 steps; the figures above are over all 56.'
    );
    expect(drawnCaption(56, 56)).toBeNull();
    expect(drawnCaption(8, undefined)).toBeNull();
    const el = document.createElement('div');
    renderSteps(el, [40, 41, 39, 42, 40, 41, 40, 39], {
      width: 320,
      color: 'blue',
      stallColor: 'orange',
      stall: null,
      totalSteps: 56
    });
    expect(el.querySelector('desc')?.textContent).toMatch(
      /^8 timings for 56 steps, median 40.0 ms/
    );
  });
});
