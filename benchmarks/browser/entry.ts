/**
 * The benchmark page's script: the report elements exactly as the extension ships them, plus a
 * hook that times one render of a report in this browser.
 */
import '../../src/view/index';
import { validateReport } from '../../src/report';
import type { GsReport } from '../../src/view/report';

/** Wait until the element and every element in its shadow roots has finished updating. */
async function settle(root: Element): Promise<void> {
  for (let pass = 0; pass < 8; pass++) {
    const pending: Promise<unknown>[] = [];
    let dirty = false;
    const visit = (node: Element | ShadowRoot): void => {
      for (const el of node.querySelectorAll('*')) {
        const lit = el as Partial<GsReport>;
        if (lit.updateComplete) {
          dirty =
            dirty ||
            (lit as unknown as { isUpdatePending: boolean }).isUpdatePending;
          pending.push(lit.updateComplete);
        }
        if (el.shadowRoot) {
          visit(el.shadowRoot);
        }
      }
    };
    pending.push((root as GsReport).updateComplete);
    if (root.shadowRoot) {
      visit(root.shadowRoot);
    }
    await Promise.all(pending);
    if (!dirty && pass > 0) {
      return;
    }
  }
}

export interface RenderTiming {
  /** Schema validation alone (part of every render). */
  validateMs: number;
  /** From setting the report to the charts drawn and laid out (next animation frame). */
  renderMs: number;
  /** Points the timeline path holds after decimation. */
  timelinePoints: number;
  samples: number;
}

async function renderOnce(
  report: unknown,
  host: HTMLElement
): Promise<RenderTiming> {
  host.replaceChildren();
  const v0 = performance.now();
  validateReport(report);
  const validateMs = performance.now() - v0;
  const t0 = performance.now();
  const el = document.createElement('gs-report');
  el.report = report;
  host.appendChild(el);
  await settle(el);
  // Force style + layout, then wait for the frame that paints it.
  el.getBoundingClientRect();
  await new Promise(resolve => requestAnimationFrame(() => resolve(null)));
  const renderMs = performance.now() - t0;
  const deep = (sel: string): Element | null => {
    let found: Element | null = null;
    const visit = (node: Element | ShadowRoot): void => {
      for (const e of node.querySelectorAll('*')) {
        if (!found && e.matches(sel)) {
          found = e;
        }
        if (e.shadowRoot) {
          visit(e.shadowRoot);
        }
      }
    };
    visit(host);
    return found;
  };
  const line = deep('path.jp-GpusightTimelineChart-line');
  const samples = (
    (report as { run?: { timeline?: unknown[] } }).run?.timeline ?? []
  ).length;
  return {
    validateMs,
    renderMs,
    timelinePoints: Number(line?.getAttribute('data-points') ?? 0),
    samples
  };
}

declare global {
  interface Window {
    gpusightBench: { renderOnce: typeof renderOnce };
  }
}

window.gpusightBench = { renderOnce };
