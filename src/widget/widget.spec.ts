// @vitest-environment happy-dom
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import full from '../report/fixtures/full-report.json';
import { ReportModel } from './model';
import { MODULE_NAME, MODULE_VERSION } from './version';
import { ReportView } from './view';

const root = join(__dirname, '..', '..');

/** Just enough of a widget manager for a model that is never synced to a kernel. */
const manager = {
  get_model: () => Promise.reject(new Error('none')),
  create_view: () => Promise.reject(new Error('none')),
  display_view: () => Promise.resolve(),
  callbacks: () => ({})
};

function makeView(): { model: ReportModel; view: ReportView } {
  const model = new ReportModel(
    {},
    { model_id: 'test', widget_manager: manager as never }
  );
  const view = new ReportView({ model, options: {} } as never);
  view.render();
  document.body.appendChild(view.el);
  return { model, view };
}

describe('version', () => {
  it('matches package.json and the Python package, which sends it as _model_module_version', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf-8'));
    expect(MODULE_NAME).toBe('gpusight');
    expect(MODULE_VERSION).toBe(pkg.version);
    const py = readFileSync(
      join(root, 'python_pkg/gpusight/_version.py'),
      'utf-8'
    );
    expect(py).toContain(`__version__ = "${MODULE_VERSION}"`);
  });
});

describe('ReportModel', () => {
  it('names its model and view in module gpusight, with no report or progress yet', () => {
    const { model } = makeView();
    expect(model.get('_model_name')).toBe('ReportModel');
    expect(model.get('_view_name')).toBe('ReportView');
    expect(model.get('_model_module')).toBe('gpusight');
    expect(model.get('_view_module_version')).toBe(MODULE_VERSION);
    expect(model.get('report')).toEqual({});
    expect(model.get('progress')).toBeNull();
  });
});

describe('ReportView', () => {
  it('shows progress while it is set, then the report when it arrives', async () => {
    const { model, view } = makeView();
    expect(view.el.children).toHaveLength(0);
    model.set('progress', { stage: 'Benchmarking copies', fraction: 0.25 });
    const progress = view.el.querySelector('gs-progress');
    expect(progress?.stage).toBe('Benchmarking copies');
    expect(progress?.fraction).toBe(0.25);
    await progress?.updateComplete;
    expect(
      progress?.shadowRoot
        ?.querySelector('[role="progressbar"]')
        ?.getAttribute('aria-valuenow')
    ).toBe('25');

    model.set('report', full);
    model.set('progress', null);
    expect(view.el.querySelector('gs-progress')).toBeNull();
    const report = view.el.querySelector('gs-report');
    expect(report).not.toBeNull();
    await report?.updateComplete;
    expect(report?.validation?.ok).toBe(true);
    expect(report?.shadowRoot?.querySelector('gs-verdict')).not.toBeNull();
  });

  it('hands a malformed report to <gs-report>, which names the field', async () => {
    const { model, view } = makeView();
    model.set('report', {
      ...full,
      verdict: { ...full.verdict, bottleneck: 'gremlins' }
    });
    const report = view.el.querySelector('gs-report');
    await report?.updateComplete;
    expect(report?.validation).toMatchObject({
      ok: false,
      path: 'verdict.bottleneck'
    });
    expect(report?.shadowRoot?.querySelector('gs-error')).not.toBeNull();
  });

  it('offers Insert only when the plugin found a notebook to insert into', async () => {
    ReportView.insertable = true;
    try {
      const { model, view } = makeView();
      model.set('report', full);
      expect(view.el.querySelector('gs-report')?.insertable).toBe(true);
    } finally {
      ReportView.insertable = false;
    }
    const { model, view } = makeView();
    model.set('report', full);
    expect(view.el.querySelector('gs-report')?.insertable).toBe(false);
  });
});
