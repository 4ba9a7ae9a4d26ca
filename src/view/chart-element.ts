/**
 * Base for elements that hold a d3 chart: lit renders the frame (heading, controls, text
 * equivalent), then the chart draws into its host <div>s at the element's width.
 *
 * Drawing is batched: every chart element updated in the same turn is measured first (one
 * layout for all of them) and drawn after. Measuring and drawing element by element instead makes
 * each measurement force a fresh layout of everything drawn before it, which cost a report with
 * seven charts about half its render time.
 */
import { LitElement } from 'lit';
import { state } from 'lit/decorators.js';
import { chartWidth } from '../charts/frame';

const pending = new Set<ChartElement>();
let scheduled = false;

function flush(): void {
  scheduled = false;
  const elements = [...pending].filter(el => el.isConnected);
  pending.clear();
  // All reads, then all writes.
  const widths = elements.map(el => el.measureChartWidth());
  elements.forEach((el, i) => el.drawChartsAt(widths[i]));
}

export abstract class ChartElement extends LitElement {
  /** Content width in px, from a ResizeObserver; 0 until measured. */
  @state() protected measuredWidth = 0;

  private _resize: ResizeObserver | null = null;

  override connectedCallback(): void {
    super.connectedCallback();
    if (typeof ResizeObserver !== 'undefined') {
      this._resize = new ResizeObserver(entries => {
        const w = Math.floor(entries[0]?.contentRect.width ?? 0);
        // Redraw on real changes only: sub-pixel jitter would otherwise loop with layout.
        if (w > 0 && Math.abs(w - this.measuredWidth) >= 2) {
          this.measuredWidth = w;
        }
      });
      this._resize.observe(this);
    }
  }

  override disconnectedCallback(): void {
    this._resize?.disconnect();
    this._resize = null;
    pending.delete(this);
    super.disconnectedCallback();
  }

  /**
   * The class of the element's chart hosts; the first one is measured in the batch for all of
   * them. An element that leaves it empty measures its hosts itself (`widthOf`) and gets 0.
   */
  protected readonly chartHostClass: string = '';

  /** Draw the d3 charts at `width` px into their hosts. */
  protected abstract drawCharts(width: number): void;

  /** Width the charts draw at: the first chart host's (a default when it cannot be measured). */
  measureChartWidth(): number {
    if (!this.chartHostClass) {
      return 0;
    }
    return chartWidth(this.chartHost(this.chartHostClass)?.clientWidth);
  }

  /** The width a chart draws at in `host` (forces a layout: prefer the batched width). */
  protected widthOf(host: HTMLElement): number {
    return chartWidth(host.clientWidth);
  }

  drawChartsAt(width: number): void {
    this.drawCharts(width);
  }

  protected override updated(): void {
    pending.add(this);
    if (!scheduled) {
      scheduled = true;
      // Lit updates the elements of one render in successive microtasks, so one queued after
      // them sees every element of the batch.
      queueMicrotask(flush);
    }
  }

  /** The chart host element with the given class in this element's shadow root. */
  protected chartHost(className: string): HTMLElement | null {
    return this.renderRoot.querySelector<HTMLElement>(`.${className}`);
  }
}
