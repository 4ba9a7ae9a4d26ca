// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from 'vitest';
import './timeline';

afterEach(() => document.body.replaceChildren());

describe('<gs-timeline>', () => {
  it('lists only the series it draws, and no NaN in its summary', async () => {
    const el = document.createElement('gs-timeline');
    // A CPU-only run: its samples carry no GPU reading.
    el.run = {
      steps: 3,
      step_time_ms: 10,
      timeline: [5497, 800, 1200, 1600].map((cpu, i) => ({
        t: i * 0.1,
        cpu_pct: cpu
      }))
    };
    el.cpuCount = 16;
    document.body.appendChild(el);
    await el.updateComplete;
    const root = el.shadowRoot as ShadowRoot;
    const legend = [
      ...root.querySelectorAll('.jp-GpusightTimeline-legend li')
    ].map(li => li.textContent?.trim());
    expect(legend).toEqual(['Host CPU (of 16 cores)']);
    const table = root.querySelector('table')?.textContent ?? '';
    expect(table).not.toContain('NaN');
    expect(table).toContain('100%'); // the largest share, not 1,600%
    expect(table).not.toContain('5,497');
  });
});
