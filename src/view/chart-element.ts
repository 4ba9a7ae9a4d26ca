/**
 * Base for elements that hold a d3 chart: lit renders the frame (heading, controls, text
 * equivalent), then the chart draws into a host <div> after each update, at the element's width.
 */
import { LitElement } from 'lit';
import { state } from 'lit/decorators.js';
import { chartWidth } from '../charts/frame';

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
    super.disconnectedCallback();
  }

  /** The width a chart draws at in `host` (a default when it cannot be measured). */
  protected widthOf(host: HTMLElement): number {
    return chartWidth(host.clientWidth);
  }

  /** Draw the d3 charts into their hosts; called after every render. */
  protected abstract drawCharts(): void;

  protected override updated(): void {
    this.drawCharts();
  }

  /** The chart host element with the given class in this element's shadow root. */
  protected chartHost(className: string): HTMLElement | null {
    return this.renderRoot.querySelector<HTMLElement>(`.${className}`);
  }
}
