/**
 * The SVG root every chart draws into. Charts own only the element they are given: they clear it,
 * append one <svg>, and never reach outside it.
 */
import { select, type Selection } from 'd3-selection';

export type Svg = Selection<SVGSVGElement, unknown, null, undefined>;

export interface FrameOptions {
  width: number;
  height: number;
  /** Accessible name: what the chart shows. */
  label: string;
  /** Accessible description: the chart's content in a sentence or two. */
  description: string;
  /** jp-Gpusight* class of the chart. */
  className: string;
}

/** Width used when the host cannot measure itself (hidden, not yet attached, or a test DOM). */
export const DEFAULT_WIDTH = 640;

export function chartWidth(measured: number | undefined): number {
  return measured && measured > 120 ? Math.floor(measured) : DEFAULT_WIDTH;
}

/** Clears `container` and returns a fresh, labelled <svg> inside it. */
export function chartFrame(container: Element, opts: FrameOptions): Svg {
  container.replaceChildren();
  const svg = select(container)
    .append('svg')
    .attr('class', `jp-GpusightChart ${opts.className}`)
    .attr('width', opts.width)
    .attr('height', opts.height)
    .attr('viewBox', `0 0 ${opts.width} ${opts.height}`)
    .attr('role', 'img')
    .attr('aria-label', opts.label);
  // <title>/<desc> carry the same text for tools that read them rather than aria-label.
  svg.append('title').text(opts.label);
  svg.append('desc').text(opts.description);
  return svg;
}

/** Rough text width for deciding whether a label fits inside a bar (no layout needed). */
export function approxTextWidth(text: string, fontPx = 11): number {
  return text.length * fontPx * 0.6;
}

/**
 * `text`, cut with "…" to fit `maxPx` at `fontPx` (estimated, no layout): a label never runs
 * past its chart's edge. The full text stays in the chart's description and tooltips.
 */
export function fitText(text: string, maxPx: number, fontPx = 12): string {
  if (approxTextWidth(text, fontPx) <= maxPx) {
    return text;
  }
  const chars = Math.max(1, Math.floor(maxPx / (fontPx * 0.6)) - 1);
  return `${text.slice(0, chars).trimEnd()}…`;
}

/** Extra height (px) of each label line after the first. */
export const LINE_HEIGHT = 15;

/**
 * A row label as lines that fit `maxPx`: "name: numbers" on one line when it fits, else the name
 * over the numbers (each cut to fit), so a narrow chart never loses the numbers.
 */
export function labelLines(
  name: string,
  numbers: string,
  maxPx: number
): string[] {
  const one = `${name}: ${numbers}`;
  if (approxTextWidth(one, 12) <= maxPx) {
    return [one];
  }
  return [fitText(`${name}:`, maxPx), fitText(numbers, maxPx)];
}

/**
 * An axis title as one line, or two split at a space (the first as long as fits), each cut to
 * fit `maxPx`: "compute-only ms per 32 samples" along a 134 px axis loses no words.
 */
export function wrapLabel(text: string, maxPx: number, fontPx = 12): string[] {
  if (approxTextWidth(text, fontPx) <= maxPx) {
    return [text];
  }
  const words = text.split(' ');
  let n = words.length - 1;
  while (
    n > 1 &&
    approxTextWidth(words.slice(0, n).join(' '), fontPx) > maxPx
  ) {
    n--;
  }
  if (n < 1) {
    return [fitText(text, maxPx, fontPx)];
  }
  return [
    fitText(words.slice(0, n).join(' '), maxPx, fontPx),
    fitText(words.slice(n).join(' '), maxPx, fontPx)
  ];
}
