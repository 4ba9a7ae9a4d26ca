/**
 * `<gs-first-fix>`: the one change to make first, on top of the report: what it is, what it gains
 * (measured, or estimated and marked so) and its fix. The rest of the findings follow below.
 */
import { LitElement, css, html, nothing } from 'lit';
import { property } from 'lit/decorators.js';
import type { Finding, GpusightReport } from '../report';
import { define } from './define';
import {
  evidenceList,
  evidenceStyles,
  impactText,
  isLead,
  sortFindings,
  unifyTimes
} from './findings';
import './fix-card';
import { cpuOnlyBuild } from './machine';
import { baseStyles } from './styles';

export const CPU_ONLY_ID = 'env.cpu_only_build';
export const RAISED_ID = 'code.raised';

/** The check's finding for a CPU-only build, for reports that do not carry it. */
export function cpuOnlyFinding(version: string): Finding {
  return {
    id: CPU_ONLY_ID,
    severity: 'critical',
    title: `torch ${version} is a CPU-only build: it cannot use any GPU`,
    evidence: [
      { label: 'torch', value: version },
      { label: 'torch.version.cuda', value: 'None (no CUDA in this build)' }
    ],
    impact: { basis: 'none', text: 'Nothing runs on a GPU.' },
    fix: {
      text:
        'Install a CUDA build of torch in its place; `gpusight check` names the index ' +
        "that fits this machine's driver."
    }
  };
}

/**
 * The finding to act on first: the exception of a run that raised before measuring anything,
 * then a CPU-only build on a machine with a GPU before anything (nothing
 * else matters until that GPU can be used), then a lead (report.LEADS: a debugging switch that
 * slowed every step it measured), else the largest measured or estimated impact,
 * skipping info-only findings. On a machine without a GPU a CUDA build would change nothing: the
 * run's own fix comes first.
 */
export function firstFinding(report: GpusightReport): Finding | null {
  if (report.run?.error?.measured_steps === 0) {
    // The run raised before its first measured step: its exception is what to fix first.
    const raised = report.findings.find(f => f.id === RAISED_ID);
    if (raised) {
      return raised;
    }
  }
  const cpuOnly = cpuOnlyBuild(report);
  const gpuHere = (report.machine.gpus ?? []).length > 0;
  if (cpuOnly !== null && gpuHere) {
    // A report made before the kernel side named the build still leads with it.
    return (
      (report.findings ?? []).find(f => f.id === CPU_ONLY_ID) ??
      cpuOnlyFinding(cpuOnly)
    );
  }
  const findings = (report.findings ?? []).filter(
    f => gpuHere || f.id !== CPU_ONLY_ID
  );
  const ranked = sortFindings(findings).filter(f => f.fix?.text);
  return (
    ranked.find(isLead) ??
    ranked.find(f => f.severity === 'critical' && f.impact.basis !== 'none') ??
    ranked.find(f => f.severity !== 'info') ??
    null
  );
}

/** "Measured: 1.84× faster, up to 45.6% of step time" / "Estimated: ..." / null. */
export function gainText(f: Finding): string | null {
  const numbers = impactText(f);
  if (f.impact.basis === 'none') {
    return f.impact.text || null;
  }
  const basis = f.impact.basis === 'measured' ? 'Measured' : 'Estimated';
  return numbers ? `${basis}: ${numbers}` : `${basis}: ${f.impact.text}`;
}

export class GsFirstFix extends LitElement {
  static override styles = [
    baseStyles,
    evidenceStyles,
    css`
      :host {
        margin: 0;
      }
      details.jp-GpusightFirstFix-evidence summary {
        cursor: pointer;
        color: var(--jp-ui-font-color2);
      }
      section {
        border: var(--jp-border-width) solid var(--jp-brand-color1);
        border-left-width: 4px;
        border-radius: var(--jp-border-radius);
        background: var(--jp-layout-color1);
        padding: 8px 12px;
      }
      .jp-GpusightFirstFix-kicker {
        color: var(--jp-ui-font-color2);
        font-size: var(--jp-ui-font-size1);
        text-transform: uppercase;
        letter-spacing: 0.04em;
        margin: 0;
      }
      h3 {
        margin: 2px 0 4px;
        overflow-wrap: anywhere;
      }
      .jp-GpusightFirstFix-gain {
        margin: 0 0 6px;
        font-weight: 600;
      }
      .jp-GpusightFirstFix-gain.jp-mod-estimated {
        font-style: italic;
      }
    `
  ];

  @property({ attribute: false }) finding: Finding | null = null;
  @property({ type: Boolean }) insertable = false;

  override connectedCallback(): void {
    super.connectedCallback();
    this.classList.add('jp-GpusightFirstFix');
  }

  protected override render() {
    const f = this.finding;
    if (!f) {
      return nothing;
    }
    const gain = gainText(f);
    return html`<section
      class="jp-GpusightFirstFix"
      aria-labelledby="title"
      data-id=${f.id}
    >
      <p class="jp-GpusightFirstFix-kicker">Do this first</p>
      <h3 id="title" class="jp-GpusightFirstFix-title">
        ${unifyTimes(f.title)}
      </h3>
      ${
        gain
          ? html`<p class="jp-GpusightFirstFix-gain jp-mod-${f.impact.basis}">
              ${gain}
            </p>`
          : nothing
      }
      ${
        f.evidence.length
          ? html`<details class="jp-GpusightFirstFix-evidence">
              <summary>Evidence</summary>
              ${evidenceList(f)}
            </details>`
          : nothing
      }
      <gs-fix-card
        .fix=${f.fix}
        finding-id=${f.id}
        ?insertable=${this.insertable}
      ></gs-fix-card>
    </section>`;
  }
}

define('gs-first-fix', GsFirstFix);

declare global {
  interface HTMLElementTagNameMap {
    'gs-first-fix': GsFirstFix;
  }
}
