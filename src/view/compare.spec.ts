// @vitest-environment happy-dom
import full from '../report/fixtures/full-report.json';
import { afterEach, describe, expect, it } from 'vitest';
import { beforeAfter } from '../report/fixtures/before-after';
import type { GsCompare } from './compare';
import { speedupText } from './compare';
import './compare';

async function settle(el: Element): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await Promise.all(
      [el, ...deepAll(el, '*')].map(
        e => (e as Partial<GsCompare>).updateComplete ?? Promise.resolve(true)
      )
    );
  }
}

function deepAll(root: Element | ShadowRoot, selector: string): Element[] {
  const out: Element[] = [];
  const visit = (node: Element | ShadowRoot): void => {
    for (const el of node.querySelectorAll('*')) {
      if (el.matches(selector)) {
        out.push(el);
      }
      if (el.shadowRoot) {
        visit(el.shadowRoot);
      }
    }
  };
  visit(root instanceof Element && root.shadowRoot ? root.shadowRoot : root);
  return out;
}

async function mount(before: unknown, after: unknown): Promise<GsCompare> {
  const el = document.createElement('gs-compare');
  el.reportBefore = before;
  el.reportAfter = after;
  document.body.appendChild(el);
  await settle(el);
  return el;
}

afterEach(() => document.body.replaceChildren());

describe('speedupText', () => {
  it('says faster, slower or no change', () => {
    expect(speedupText(2)).toBe('2.00× faster');
    expect(speedupText(0.8)).toBe('1.25× slower');
    expect(speedupText(1.001)).toBe('no change');
    expect(speedupText(null)).toBe('');
  });
});

describe('<gs-compare>', () => {
  it('shows the speedup, both sides and every finding change', async () => {
    const { before, after } = beforeAfter(full);
    const el = await mount(before, after);
    const text = el.shadowRoot!.textContent!.replace(/\s+/g, ' ');
    expect(text).toContain('84.2 ms → 42.1 ms per step: 2.00× faster');
    // Each side is drawn by the report's own elements.
    expect(deepAll(el, 'gs-verdict')).toHaveLength(2);
    expect(deepAll(el, 'gs-breakdown')).toHaveLength(2);
    expect(deepAll(el, 'svg.jp-GpusightChart').length).toBeGreaterThanOrEqual(
      2
    );
    const rows = deepAll(el, 'tr[data-finding]').map(tr => [
      tr.getAttribute('data-finding'),
      tr.querySelector('.jp-GpusightCompare-status')!.textContent!.trim()
    ]);
    expect(rows).toEqual([
      ['code.pageable_copy@0', 'Resolved'],
      ['load.amp_unused', 'New'],
      ['cfg.tf32_disabled', 'Still there'],
      ['env.launch_blocking', 'Still there']
    ]);
    expect(text).toContain('Warning → Info');
    const copyRow = deepAll(el, '.jp-GpusightCompare-breakdown tr').find(tr =>
      tr.textContent!.includes('Host-device copies')
    )!;
    expect(copyRow.textContent!.replace(/\s+/g, ' ')).toContain(
      '26.4 ms 0.40 ms −26.0 ms'
    );
  });

  it('names the side and field of a malformed report', async () => {
    const { before, after } = beforeAfter(full);
    (after as unknown as { verdict: unknown }).verdict = 'fast';
    const el = await mount(before, after);
    const errors = deepAll(el, 'gs-error');
    expect(errors).toHaveLength(1);
    const text = errors[0].shadowRoot!.textContent!;
    expect(text).toContain('The "after" report cannot be shown');
    expect(text).toContain('verdict');
    expect(deepAll(el, 'gs-verdict')).toHaveLength(0);
  });

  it('keeps hostile strings as text', async () => {
    const { before, after } = beforeAfter(full);
    const evil = '</script><img src=x onerror="window.__pwned=1">';
    after.findings[0].title = evil;
    before.title = evil;
    const el = await mount(before, after);
    expect(deepAll(el, 'img')).toHaveLength(0);
    expect(el.shadowRoot!.textContent).toContain(evil);
  });
});
