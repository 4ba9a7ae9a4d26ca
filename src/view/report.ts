/**
 * `<gs-report>`: a whole report. Give it any value; it is validated first (src/report), and a
 * report that fails is shown as a `<gs-error>` naming the field instead of being drawn half-way.
 */
import { LitElement, css, html, nothing } from 'lit';
import { property, state } from 'lit/decorators.js';
import { exportReport, reportExporter } from '../export/exporter';
import {
  validateReport,
  type GpusightReport,
  type ReportValidation
} from '../report';
import './benchmarks';
import './breakdown';
import './checklist';
import { define } from './define';
import './error';
import './findings';
import { firstFinding } from './first-fix';
import { cpuOnlyBuild, gpuInUse } from './machine';
import { humanDate, notRun, type NotRunGroup } from './not-run';
import { shownWhatIfs } from './shown-gains';
import { baseStyles } from './styles';
import './host-lines';
import './speed-of-light';
import './timeline';
import { raisedBeforeMeasuring } from './verdict';
import './whatifs';
import { breakable } from './wrap';

const KIND_LABEL: Record<GpusightReport['kind'], string> = {
  check: 'Environment check',
  bench: 'Hardware benchmarks',
  watch: 'Training run',
  diagnose: 'Diagnosis',
  inference: 'Inference run',
  distributed: 'Distributed run'
};

function gib(bytes: number | null | undefined): string | null {
  return typeof bytes === 'number'
    ? `${(bytes / 2 ** 30).toFixed(1)} GiB`
    : null;
}

/** One line about the machine: GPUs, torch, driver. */
export function machineLine(report: GpusightReport): string {
  const m = report.machine;
  const gpus = m.gpus.length
    ? m.gpus.map(g => `GPU ${g.index}: ${g.name}`).join(', ')
    : 'no GPU visible';
  const torch = m.torch ? `torch ${m.torch.version}` : 'torch not installed';
  const driver = m.driver_version ? `driver ${m.driver_version}` : null;
  return [gpus, torch, driver].filter(Boolean).join(' · ');
}

export class GsReport extends LitElement {
  static override styles = [
    baseStyles,
    css`
      .jp-GpusightReport {
        display: flex;
        flex-direction: column;
        gap: 12px;
        padding: 4px 0;
      }
      header.jp-GpusightReport-header {
        display: flex;
        flex-wrap: wrap;
        align-items: baseline;
        gap: 4px 12px;
      }
      header h2 {
        margin: 0;
      }
      .jp-GpusightReport-meta {
        color: var(--jp-ui-font-color2);
      }
      .jp-GpusightReport-notes {
        margin: 0;
        padding-left: 18px;
        color: var(--jp-ui-font-color2);
      }
      details.jp-GpusightReport-notRun {
        border: var(--jp-border-width) solid var(--jp-border-color2);
        border-radius: var(--jp-border-radius);
        padding: 4px 12px;
      }
      details.jp-GpusightReport-notRun summary {
        cursor: pointer;
        color: var(--jp-ui-font-color1);
      }
      .jp-GpusightReport-notRun ul {
        margin: 4px 0;
        padding-left: 18px;
      }
      .jp-GpusightReport-notRunWhat {
        color: var(--jp-ui-font-color2);
      }
      gs-breakdown,
      gs-host-lines,
      gs-speed-of-light,
      gs-timeline,
      gs-findings,
      gs-whatifs,
      gs-benchmarks,
      gs-checklist {
        margin: 0;
      }
      .jp-GpusightReport-export {
        margin-left: auto;
      }
      .jp-GpusightReport-exportStatus {
        color: var(--jp-error-color1);
      }
      details.jp-GpusightReport-machine summary {
        cursor: pointer;
        color: var(--jp-ui-font-color2);
      }
    `
  ];

  /** Anything: a report object straight from a kernel message or a parsed file. */
  @property({ attribute: false }) report: unknown = null;
  /** The host handles `gs-insert-cell` (a notebook): fix cards offer "Insert cell below". */
  @property({ type: Boolean }) insertable = false;

  /** Hide "Export HTML" here even where an exporter is set (a host with its own export). */
  @property({ type: Boolean, attribute: 'no-export' }) noExport = false;

  private _result: ReportValidation | null = null;
  /** Why the last export failed; cleared by the next attempt. */
  @state() private _exportError: string | null = null;

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightReport');
  }

  protected override willUpdate(changed: Map<PropertyKey, unknown>): void {
    if (changed.has('report')) {
      this._result =
        this.report === null || this.report === undefined
          ? null
          : validateReport(this.report);
    }
  }

  /** The validation outcome of the current report (null before one is set). */
  get validation(): ReportValidation | null {
    return this._result;
  }

  protected override render() {
    const result = this._result;
    if (!result) {
      return nothing;
    }
    if (!result.ok) {
      const upgrade =
        result.path === 'schema_version' && /newer/.test(result.error);
      return html`<gs-error
        .heading=${upgrade ? 'This report needs a newer gpusight' : 'This report cannot be shown'}
        .path=${result.path}
        .message=${result.error}
        .hint=${
          upgrade
            ? 'Upgrade the gpusight package in this Jupyter environment, then reload the page.'
            : 'The report is damaged or was edited by hand: re-create it with gpusight, or fix the named field.'
        }
      ></gs-error>`;
    }
    const r = result.report;
    const run = r.run ?? null;
    // Nothing was measured: no step split to draw (rules/raised_run.py).
    const raised = raisedBeforeMeasuring(run);
    const gpu = gpuInUse(r);
    const cpuOnly = cpuOnlyBuild(r);
    const first = firstFinding(r);
    const skipped = notRun(r);
    const notes = (r.notes ?? []).filter(n => !skipped.notes.includes(n));
    // Skipped work is listed once, under "Not run, and why"; a partial sweep still shows.
    const swept = (x: { series?: unknown[] }) => (x.series?.length ?? 0) > 1;
    const measured = r.benchmarks.filter(
      b => typeof b.value === 'number' || swept(b)
    );
    const whatIfs = shownWhatIfs(r.what_if);
    return html`<article class="jp-GpusightReport" aria-label="gpusight report">
      <header class="jp-GpusightReport-header">
        <h2>${r.title ?? `gpusight: ${KIND_LABEL[r.kind] ?? r.kind}`}</h2>
        <span class="jp-GpusightReport-meta"
          >${machineLine(r)} ·
          <time datetime=${r.created_at} title=${r.created_at}
            >${humanDate(r.created_at)}</time
          ></span
        >
        ${this._exportButton(r)}
      </header>
      <gs-verdict
        .verdict=${r.verdict}
        .gpu=${gpu}
        .cpuOnly=${cpuOnly}
        .raised=${raised}
      ></gs-verdict>
      ${
        first
          ? html`<gs-first-fix
              .finding=${first}
              ?insertable=${this.insertable}
            ></gs-first-fix>`
          : nothing
      }
      ${
        r.findings.length || (r.kind !== 'check' && !first)
          ? html`<gs-findings
              .findings=${r.findings}
              .exclude=${first?.id ?? null}
              ?insertable=${this.insertable}
            ></gs-findings>`
          : nothing
      }
      ${
        run && !raised
          ? html`<gs-breakdown .run=${run} .gpu=${gpu}></gs-breakdown>`
          : nothing
      }
      ${
        run?.host_lines && !raised
          ? html`<gs-host-lines .run=${run}></gs-host-lines>`
          : nothing
      }
      ${
        run?.speed_of_light
          ? html`<gs-speed-of-light .run=${run}></gs-speed-of-light>`
          : nothing
      }
      ${
        run?.timeline?.length
          ? html`<gs-timeline
              .run=${run}
              .cpuCount=${r.machine.cpu_count ?? null}
            ></gs-timeline>`
          : nothing
      }
      ${
        whatIfs.length
          ? html`<gs-whatifs
              .whatIfs=${whatIfs}
              ?insertable=${this.insertable}
            ></gs-whatifs>`
          : nothing
      }
      ${
        measured.length
          ? html`<gs-benchmarks .benchmarks=${measured}></gs-benchmarks>`
          : nothing
      }
      ${r.checks.length ? html`<gs-checklist .checks=${r.checks}></gs-checklist>` : nothing}
      ${skipped.groups.length ? this._notRun(skipped.groups) : nothing}
      ${
        notes.length
          ? html`<section aria-label="Notes">
              <ul class="jp-GpusightReport-notes">
                ${notes.map(n => html`<li>${n}</li>`)}
              </ul>
            </section>`
          : nothing
      }
      ${this._machine(r)}
    </article>`;
  }

  /** Skipped benchmarks and what-ifs: one disclosure, grouped by reason, closed by default. */
  private _notRun(groups: NotRunGroup[]) {
    const count = groups.reduce((n, g) => n + g.items.length, 0);
    return html`<details class="jp-GpusightReport-notRun">
      <summary>Not run, and why (${count})</summary>
      <ul>
        ${groups.map(
          g =>
            html`<li>
              <strong>${g.reason}</strong>:
              <span class="jp-GpusightReport-notRunWhat"
                >${breakable(g.items.join(', '))}</span
              >
            </li>`
        )}
      </ul>
    </details>`;
  }

  /** "Export HTML", where the host can export (src/export/exporter.ts): not in the exported file. */
  private _exportButton(r: GpusightReport) {
    if (!reportExporter() || this.noExport) {
      return nothing;
    }
    return html`<button
        class="jp-GpusightReport-export"
        title="Save this report as one HTML file that opens in any browser, offline"
        @click=${() => this._export(r)}
      >
        Export HTML
      </button>
      ${
        this._exportError
          ? html`<span class="jp-GpusightReport-exportStatus" role="alert"
              >${this._exportError}</span
            >`
          : nothing
      }`;
  }

  private async _export(r: GpusightReport) {
    this._exportError = null;
    try {
      await exportReport(r);
    } catch (err) {
      this._exportError = `Export failed: ${err instanceof Error ? err.message : String(err)}`;
    }
  }

  private _machine(r: GpusightReport) {
    const m = r.machine;
    const rows: [string, string | null][] = [
      ['Host', m.hostname ?? null],
      ['Platform', m.platform],
      ['Python', m.python],
      ['CPUs', m.cpu_count === null ? null : String(m.cpu_count)],
      ['Memory', gib(m.memory_total_bytes)],
      ['Shared memory (/dev/shm)', gib(m.shm_bytes)],
      ['PyTorch', m.torch ? m.torch.version : 'not installed'],
      ['PyTorch CUDA', m.torch?.cuda ?? null],
      ['Driver', m.driver_version ?? null],
      ['Driver supports CUDA', m.driver_cuda_version ?? null],
      ['nvcc', m.nvcc_version ?? null],
      ...m.gpus.map(
        g =>
          [
            `GPU ${g.index}`,
            [
              g.name,
              g.capability ? `sm ${g.capability}` : null,
              gib(g.memory_total_bytes)
            ]
              .filter(Boolean)
              .join(', ')
          ] as [string, string]
      )
    ];
    return html`<details class="jp-GpusightReport-machine">
      <summary>Machine</summary>
      <table class="jp-Gpusight-table">
        <tbody>
          ${rows
            .filter(([, v]) => v !== null && v !== '')
            .map(
              ([k, v]) =>
                html`<tr>
                  <th scope="row">${k}</th>
                  <td>${breakable(v ?? '')}</td>
                </tr>`
            )}
        </tbody>
      </table>
    </details>`;
  }
}

define('gs-report', GsReport);

declare global {
  interface HTMLElementTagNameMap {
    'gs-report': GsReport;
  }
}
