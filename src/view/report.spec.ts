// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from 'vitest';
import full from '../report/fixtures/full-report.json';
import minimal from '../report/fixtures/minimal-report.json';
import raised from '../report/fixtures/raised-report.json';
import type { GpusightReport } from '../report';
import './index';
import type { GsReport } from './report';

function clone<T>(x: T): T {
  return JSON.parse(JSON.stringify(x)) as T;
}

async function settle(el: Element): Promise<void> {
  // Nested elements update in turn: wait until every shadow root has rendered.
  for (let i = 0; i < 5; i++) {
    const pending = [el, ...deepAll(el, '*')].map(
      e => (e as Partial<GsReport>).updateComplete ?? Promise.resolve(true)
    );
    await Promise.all(pending);
  }
}

/** querySelectorAll through open shadow roots. */
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

async function mount(report: unknown, insertable = false): Promise<GsReport> {
  const el = document.createElement('gs-report');
  el.report = report;
  el.insertable = insertable;
  document.body.appendChild(el);
  await settle(el);
  return el;
}

afterEach(() => document.body.replaceChildren());

describe('<gs-report>', () => {
  it('renders every part of a full report', async () => {
    const el = await mount(full);
    expect(el.validation?.ok).toBe(true);
    for (const tag of [
      'gs-verdict',
      'gs-findings',
      'gs-breakdown',
      'gs-timeline',
      'gs-whatifs',
      'gs-benchmarks',
      'gs-checklist'
    ]) {
      expect(deepAll(el, tag), tag).toHaveLength(1);
    }
    expect(deepAll(el, 'gs-error')).toHaveLength(0);
    expect(deepAll(el, '.jp-GpusightVerdict-bottleneck')[0].textContent).toBe(
      'Host-device copies'
    );
    // Charts drew into their hosts.
    expect(deepAll(el, 'rect.jp-GpusightBreakdownChart-rect')).toHaveLength(6);
    expect(
      deepAll(el, 'path.jp-GpusightTimelineChart-line').length
    ).toBeGreaterThanOrEqual(1);
    expect(deepAll(el, 'line.jp-GpusightCeilingsChart-ceiling')).toHaveLength(
      3
    );
    expect(deepAll(el, 'rect.jp-GpusightSpeedupsChart-bar')).toHaveLength(1);
    // One sweep per benchmark/what-if with more than one point.
    expect(deepAll(el, 'svg.jp-GpusightSweepChart')).toHaveLength(3);
    // A fix card per finding, and per what-if that carries the code it measured.
    expect(deepAll(el, 'gs-fix-card')).toHaveLength(
      full.findings.length + full.what_if.filter(w => w.fix).length
    );
  });

  it('names the field of a malformed report', async () => {
    const bad = clone(full) as unknown as Record<string, unknown> &
      GpusightReport;
    (bad.findings[0] as unknown as Record<string, unknown>).severity =
      'catastrophic';
    const el = await mount(bad);
    const errors = deepAll(el, 'gs-error');
    expect(errors).toHaveLength(1);
    expect(deepAll(el, 'gs-verdict')).toHaveLength(0);
    const path = deepAll(errors[0], '.jp-GpusightError-path')[0];
    expect(path.textContent).toBe('findings[0].severity');
    expect(
      deepAll(errors[0], '.jp-GpusightError-message')[0].textContent
    ).toContain('must be equal to one of the allowed values');
    expect(deepAll(errors[0], '[role="alert"]')).toHaveLength(1);
  });

  it('names a missing field', async () => {
    const bad = clone(minimal) as unknown as Record<string, unknown>;
    delete (bad.verdict as Record<string, unknown>).summary;
    const el = await mount(bad);
    const path = deepAll(el, '.jp-GpusightError-path')[0];
    expect(path.textContent).toBe('verdict.summary');
  });

  it('says to upgrade for a report from a newer schema', async () => {
    const newer = {
      ...clone(full),
      schema_version: '1.99',
      something_new: true
    };
    const el = await mount(newer);
    const heading = deepAll(el, 'gs-error h3')[0];
    expect(heading.textContent).toBe('This report needs a newer gpusight');
    expect(deepAll(el, '.jp-GpusightError-message')[0].textContent).toContain(
      'upgrade'
    );
  });

  it('shows a report that is not an object as an error, not a crash', async () => {
    const el = await mount('not a report');
    expect(deepAll(el, '.jp-GpusightError-path')[0].textContent).toBe('(root)');
  });

  it('draws the speed of light as a meter per ceiling, or says why there is none', async () => {
    const r = clone(full) as unknown as GpusightReport;
    r.run!.speed_of_light = {
      flops_per_step: 2e12,
      flops_by_precision: { bf16: 2e12 },
      precision: 'bf16',
      step_time_ms: 10,
      achieved_tflops: 200,
      ceilings: [
        {
          source: 'measured',
          precision: 'bf16',
          tflops: 800,
          label: 'measured'
        },
        {
          source: 'datasheet',
          precision: 'bf16',
          tflops: 989,
          label: 'datasheet'
        }
      ],
      mfu_pct: 25,
      mfu_datasheet_pct: 20.2
    };
    const el = await mount(r);
    const meters = deepAll(el, '.jp-GpusightSpeedOfLight-track');
    expect(meters.map(m => m.getAttribute('aria-valuenow'))).toEqual([
      '25',
      '20.2'
    ]);
    expect(meters[0].getAttribute('aria-label')).toContain(
      'measured on this GPU'
    );
    r.run!.speed_of_light = { unavailable: 'the model is compiled' };
    const other = await mount(r);
    expect(deepAll(other, '.jp-GpusightSpeedOfLight-track')).toEqual([]);
    const why = deepAll(other, '.jp-GpusightSpeedOfLight-why')[0];
    expect(why.textContent).toContain('FLOPs not given: the model is compiled');
  });

  it('leads a run that raised before measuring with its exception, and draws no step', async () => {
    // Made by `gpusight run` of a script whose forward calls .numpy() on a tensor that
    // requires grad (python_pkg/tests/test_raised_run.py runs the same script).
    const el = await mount(raised);
    expect(el.validation?.ok).toBe(true);
    const label = deepAll(el, '.jp-GpusightVerdict-bottleneck')[0];
    expect(label.textContent?.trim()).toBe('RuntimeError raised');
    const verdict = deepAll(el, 'div.jp-GpusightVerdict')[0];
    expect(verdict.classList.contains('jp-mod-error')).toBe(true);
    expect(verdict.textContent).toContain('The run stopped');
    expect(verdict.textContent).toContain('at x.py:12 in Net.forward');
    expect(verdict.textContent).not.toContain('CPU-only');
    const first = deepAll(el, '.jp-GpusightFirstFix-title')[0];
    expect(first.textContent).toContain('raised RuntimeError');
    expect(deepAll(el, 'gs-first-fix')[0].shadowRoot?.textContent).toContain(
      'Nothing was measured'
    );
    expect(deepAll(el, 'gs-breakdown')).toHaveLength(0);
    expect(el.shadowRoot?.textContent).not.toMatch(/Estimated|Measured:/);
  });

  it('says where the host time goes, line by line, in words a narrow panel wraps', async () => {
    const r = clone(full) as unknown as GpusightReport;
    r.schema_version = '1.6';
    r.run!.host_lines = {
      steps: 2,
      step_ms: 157.2,
      lines: [
        {
          file: 'train.py',
          line: 15,
          code: 'gc.collect()',
          function: '<module>',
          ms_per_step: 147.8,
          share_pct: 98.7,
          in_forward: false,
          waiting: false
        },
        {
          file: 'train.py',
          line: 23,
          code: 'top = np.argpartition(h.cpu().numpy(), -16)',
          function: 'Net.forward',
          ms_per_step: 0.9,
          share_pct: 0.6,
          in_forward: true,
          waiting: true
        },
        {
          file: 'train.py',
          line: 11,
          code: 'x = torch.randn(32, 64)',
          function: '<module>',
          ms_per_step: 2.1,
          share_pct: 1.3,
          in_forward: false,
          waiting: false
        }
      ]
    };
    const el = await mount(r);
    expect(el.validation?.ok).toBe(true);
    const items = deepAll(el, 'gs-host-lines li');
    // Lines under 1 % of the timed steps are left out; the order is the report's.
    expect(
      items.map(
        i => i.querySelector('.jp-GpusightHostLines-where')?.textContent
      )
    ).toEqual(['train.py:15', 'train.py:11']);
    expect(items[0].textContent).toContain('gc.collect()');
    expect(items[0].textContent).toMatch(/98\.7\s*%/);
    const foot = () =>
      (deepAll(el, 'gs-host-lines')[0].shadowRoot?.textContent ?? '').replace(
        /\s+/g,
        ' '
      );
    const host = deepAll(el, 'gs-host-lines')[0] as HTMLElement & {
      run: typeof r.run;
      updateComplete: Promise<boolean>;
    };
    host.run = { ...r.run!, step_time_ms: 150 };
    await host.updateComplete;
    expect(foot()).not.toContain('Tracing slowed');
    host.run = { ...r.run!, step_time_ms: 15.72 };
    await host.updateComplete;
    expect(foot()).toContain('Tracing slowed those steps to 157');
    expect(foot()).toContain('(15.7 ms measured): the shares hold.');
    r.run!.host_lines = {
      steps: 0,
      lines: [],
      unavailable: 'another tracer (a debugger, coverage) runs'
    };
    document.body.replaceChildren();
    const why = await mount(r);
    const whyText = (
      deepAll(why, 'gs-host-lines')[0].shadowRoot?.textContent ?? ''
    ).replace(/\s+/g, ' ');
    expect(whyText).toContain('Not timed by line: another tracer');
  });

  it('renders a minimal report without the run sections', async () => {
    const el = await mount(minimal);
    expect(el.validation?.ok).toBe(true);
    expect(deepAll(el, 'gs-timeline')).toHaveLength(0);
    expect(deepAll(el, 'gs-breakdown')).toHaveLength(0);
    expect(deepAll(el, 'gs-verdict')).toHaveLength(1);
  });

  it('passes "insertable" down to the fix cards', async () => {
    const el = await mount(full, true);
    const inserts = deepAll(el, '.jp-GpusightFixCard-insert');
    // Only Python fixes with code can be inserted.
    const fixes = [
      ...full.findings.map(f => f.fix),
      ...full.what_if.flatMap(w => (w.fix ? [w.fix] : []))
    ];
    const python = fixes.filter(
      f => f.code && (f.language ?? 'python') === 'python'
    );
    expect(inserts).toHaveLength(python.length);
    // A fix of a notebook cell can also be shown and applied there.
    expect(deepAll(el, '.jp-GpusightFixCard-applyCell')).toHaveLength(
      fixes.filter(f => 'cell' in f).length
    );
  });

  it('shows the code a what-if measured as a fix card', async () => {
    const r = clone(full) as unknown as GpusightReport;
    const code = 'loader = DataLoader(dataset, pin_memory=True, num_workers=8)';
    r.what_if[0].fix = {
      text: 'Every winner combined.',
      code,
      language: 'python'
    };
    const el = await mount(r, true);
    const cards = deepAll(el, 'gs-whatifs gs-fix-card, gs-whatifs')
      .filter(e => e.tagName === 'GS-WHATIFS')
      .flatMap(w => deepAll(w, 'gs-fix-card'));
    expect(cards).toHaveLength(1);
    expect(deepAll(cards[0], 'pre code')[0].textContent).toBe(code);
    expect(deepAll(cards[0], '.jp-GpusightFixCard-insert')).toHaveLength(1);
  });

  it('keeps hostile report strings as text everywhere', async () => {
    const hostile = '</script><img src=x onerror=alert(1)>';
    const r = clone(full);
    r.title = hostile;
    r.verdict.summary = hostile;
    r.findings[0].title = hostile;
    r.findings[0].evidence[0].label = hostile;
    r.checks[0].value = hostile;
    r.benchmarks[0].label = hostile;
    r.what_if[0].change = hostile;
    (r.notes as string[]).push(hostile);
    const el = await mount(r);
    expect(el.validation?.ok).toBe(true);
    expect(deepAll(el, 'img')).toHaveLength(0);
    expect(deepAll(el, 'script')).toHaveLength(0);
    const texts = deepAll(el, 'h2, p, h4, code, li, text').map(
      e => e.textContent ?? ''
    );
    expect(
      texts.filter(t => t.includes(hostile)).length
    ).toBeGreaterThanOrEqual(6);
  });
});

describe('<gs-checklist>', () => {
  it('shows each status with its word, symbol and value', async () => {
    const el = document.createElement('gs-checklist');
    el.checks = [
      { id: 'a', label: 'PyTorch', status: 'pass', value: '2.13.0' },
      {
        id: 'b',
        label: 'TF32',
        status: 'warn',
        value: 'off',
        detail: 'slower matmuls'
      },
      { id: 'c', label: 'CUDA', status: 'fail', value: 'not available' },
      { id: 'd', label: 'nvcc', status: 'not_checked', value: 'not found' },
      { id: 'e', label: 'Host', status: 'info', value: 'linux' }
    ];
    document.body.appendChild(el);
    await el.updateComplete;
    const root = el.shadowRoot as ShadowRoot;
    const rows = [...root.querySelectorAll('tr.jp-GpusightChecklist-row')];
    expect(rows).toHaveLength(5);
    const status = rows.map(r =>
      r
        .querySelector('.jp-GpusightChecklist-status')
        ?.textContent?.replace(/\s+/g, ' ')
        .trim()
    );
    expect(status).toEqual([
      '✓ pass',
      '! warning',
      '✗ fail',
      '– not checked',
      'i info'
    ]);
    expect(rows[1].textContent).toContain('slower matmuls');
    expect(rows[2].querySelector('.jp-mod-fail')).not.toBeNull();
    expect(root.querySelector('p')?.textContent?.trim()).toBe(
      '1 fail, 1 warning, 1 pass, 1 info, 1 not checked'
    );
  });
});

describe('<gs-findings>', () => {
  it('sorts by impact, then severity', async () => {
    const el = document.createElement('gs-findings');
    const f = (
      id: string,
      severity: 'info' | 'warn' | 'critical',
      speedup: number | null
    ) => ({
      id,
      severity,
      title: id,
      evidence: [],
      impact: { basis: 'estimated' as const, speedup, text: '' },
      fix: { text: '' }
    });
    el.findings = [
      f('cfg.tf32_disabled', 'warn', null),
      f('load.input_bound', 'warn', 1.2),
      f('env.shm_small', 'critical', null),
      f('code.pageable_copy', 'critical', 1.4)
    ] as never;
    document.body.appendChild(el);
    await el.updateComplete;
    const ids = [
      ...(el.shadowRoot as ShadowRoot).querySelectorAll('li[data-id]')
    ].map(li => li.getAttribute('data-id'));
    expect(ids).toEqual([
      'code.pageable_copy',
      'load.input_bound',
      'env.shm_small',
      'cfg.tf32_disabled'
    ]);
  });

  it('shows evidence with its source line', async () => {
    const el = await mount(full);
    const source = deepAll(el, '.jp-GpusightFindings-source')[0];
    expect(source.textContent).toContain('train.py:42');
    expect(source.textContent).toContain("x = x.to('cuda', non_blocking=True)");
  });
});

describe('<gs-progress>', () => {
  it('reports the stage and fraction to assistive tech', async () => {
    const el = document.createElement('gs-progress');
    el.stage = 'Benchmarking copies';
    el.fraction = 0.42;
    document.body.appendChild(el);
    await el.updateComplete;
    const bar = el.shadowRoot?.querySelector('[role="progressbar"]');
    expect(bar?.getAttribute('aria-valuenow')).toBe('42');
    expect(bar?.getAttribute('aria-valuetext')).toBe(
      'Benchmarking copies: 42%'
    );
    el.fraction = null;
    await el.updateComplete;
    expect(bar?.hasAttribute('aria-valuenow')).toBe(false);
    expect(bar?.classList.contains('jp-mod-indeterminate')).toBe(true);
  });
});
