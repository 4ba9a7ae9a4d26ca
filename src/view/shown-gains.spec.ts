// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from 'vitest';
import full from '../report/fixtures/full-report.json';
import type { GpusightReport, WhatIf } from '../report';
import './index';
import type { GsReport } from './report';
import { repeatOf, showsGain, shownWhatIfs } from './shown-gains';

const ALONE = 'DataLoader(pin_memory=True)';

/** Measured again as the only winner of the final run: 2.54x there, 1.41x alone. */
const again: WhatIf = {
  change: `all winners together: ${ALONE}`,
  before_ms: 90.1,
  after_ms: 35.5,
  speedup: 2.54,
  noise_pct: 9.6,
  params: { winners: 'pin_memory', repeat_of: ALONE },
  fix: {
    text: 'Every measured winner in one training loop.',
    code: '# All measured winners together: 2.54x end to end.\n'
  }
};

/** Skipped, yet carrying a number and code (a report made before the rule). */
const skippedWithNumber: WhatIf = {
  change: 'DataLoader winners together',
  before_ms: 84.2,
  after_ms: 25.3,
  speedup: 3.33,
  noise_pct: 2.0,
  skipped: 'only one DataLoader setting won: its own row measures it',
  fix: {
    text: 'The loader.',
    code: '# The DataLoader winners together: 3.33x.\n'
  }
};

function report(): GpusightReport {
  const r = JSON.parse(JSON.stringify(full)) as GpusightReport;
  r.what_if = [...r.what_if, again, skippedWithNumber];
  return r;
}

/** Every text under `root`, through open shadow roots. */
function deepText(root: Element | ShadowRoot): string {
  if (root instanceof Element && root.shadowRoot) {
    return `${root.shadowRoot.textContent ?? ''} ${deepText(root.shadowRoot)}`;
  }
  let text = '';
  for (const el of root.querySelectorAll('*')) {
    if (el.shadowRoot) {
      text += ` ${el.shadowRoot.textContent ?? ''} ${deepText(el.shadowRoot)}`;
    }
  }
  return text;
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

async function mount(r: GpusightReport): Promise<GsReport> {
  const el = document.createElement('gs-report');
  el.report = r;
  document.body.appendChild(el);
  for (let i = 0; i < 5; i++) {
    await Promise.all(
      [el, ...deepAll(el, '*')].map(
        e => (e as Partial<GsReport>).updateComplete ?? Promise.resolve(true)
      )
    );
  }
  return el;
}

afterEach(() => document.body.replaceChildren());

describe('one gain per change', () => {
  it('shows a gain only for a row that ran and repeats no other', () => {
    const [alone, sweep] = full.what_if as WhatIf[];
    expect(showsGain(alone)).toBe(true);
    expect(showsGain(again)).toBe(false);
    expect(repeatOf(again)).toBe(ALONE);
    expect(showsGain(skippedWithNumber)).toBe(false);
    // A partial sweep still draws its points; the repeat and the skipped row do not.
    expect(
      shownWhatIfs([alone, sweep, again, skippedWithNumber]).map(w => w.change)
    ).toEqual([alone.change, sweep.change]);
  });

  it('draws no second gain, no number of a skipped row and no card for either', async () => {
    const el = await mount(report());
    expect(el.validation?.ok).toBe(true);
    const text = deepText(el);
    expect(text).toContain('1.41');
    expect(text).not.toContain('2.54');
    expect(text).not.toContain('3.33');
    expect(deepAll(el, 'rect.jp-GpusightSpeedupsChart-bar')).toHaveLength(1);
    // A fix card per finding and for the one measured row with code: none for the others.
    expect(deepAll(el, 'gs-fix-card')).toHaveLength(full.findings.length + 1);
    // The skipped row is listed with its reason, without its number.
    const notRun = deepAll(el, 'details.jp-GpusightReport-notRun')[0];
    expect(notRun.textContent).toContain('DataLoader winners together');
    expect(notRun.textContent).toContain('its own row measures it');
  });
});
