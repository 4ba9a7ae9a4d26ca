// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../report';
import './breakdown';

afterEach(() => document.body.replaceChildren());

async function mount(run: Run): Promise<ShadowRoot> {
  const el = document.createElement('gs-breakdown');
  el.run = run;
  document.body.appendChild(el);
  await el.updateComplete;
  return el.shadowRoot as ShadowRoot;
}

describe('<gs-breakdown> step strip', () => {
  it('counts the bars it draws when they are fewer than the steps of the mean', async () => {
    const root = await mount({
      steps: 56,
      step_time_ms: 40.2,
      step_times_ms: [40, 41, 39, 42, 40, 41, 40, 39]
    });
    expect(root.textContent).toContain('mean of 56 steps');
    expect(
      root.querySelector('.jp-GpusightBreakdown-drawn')?.textContent?.trim()
    ).toBe('8 timings drawn for 56 steps; the figures above are over all 56.');
  });

  it('says nothing more when there is one bar per step', async () => {
    const root = await mount({
      steps: 4,
      step_time_ms: 40,
      step_times_ms: [40, 41, 39, 42]
    });
    expect(root.querySelector('.jp-GpusightBreakdown-drawn')).toBeNull();
  });
});
