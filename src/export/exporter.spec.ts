// @vitest-environment happy-dom
import { afterEach, describe, expect, it } from 'vitest';
import full from '../report/fixtures/full-report.json';
import type { GpusightReport } from '../report';
import '../view/report';
import type { GsReport } from '../view/report';
import { setReportExporter } from './exporter';

async function mount(): Promise<GsReport> {
  const el = document.createElement('gs-report');
  el.report = full;
  document.body.append(el);
  await el.updateComplete;
  return el;
}

function exportButton(el: GsReport): HTMLButtonElement | null {
  return el.shadowRoot!.querySelector('button.jp-GpusightReport-export');
}

afterEach(() => {
  setReportExporter(null);
  document.body.replaceChildren();
});

describe('Export HTML in <gs-report>', () => {
  it('is absent where nothing can export (the exported file itself)', async () => {
    expect(exportButton(await mount())).toBeNull();
  });

  it('hands the validated report to the exporter', async () => {
    const seen: GpusightReport[] = [];
    setReportExporter(async r => {
      seen.push(r);
      return 'x.html';
    });
    const el = await mount();
    exportButton(el)!.click();
    await el.updateComplete;
    expect(seen).toHaveLength(1);
    expect(seen[0].title).toBe(full.title);
  });

  it('is hidden where the host asks (no-export)', async () => {
    setReportExporter(async () => 'x.html');
    const el = await mount();
    expect(exportButton(el)).not.toBeNull();
    el.noExport = true;
    await el.updateComplete;
    expect(exportButton(el)).toBeNull();
  });

  it('says why an export failed', async () => {
    setReportExporter(() => Promise.reject(new Error('disk full')));
    const el = await mount();
    exportButton(el)!.click();
    await new Promise(resolve => setTimeout(resolve, 0));
    await el.updateComplete;
    expect(el.shadowRoot!.querySelector('[role="alert"]')?.textContent).toBe(
      'Export failed: disk full'
    );
  });
});
