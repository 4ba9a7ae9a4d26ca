/** Step-time breakdown: one stacked horizontal bar, each category labelled in ms and % of the step. */
import { scaleLinear } from 'd3-scale';
import { BREAKDOWN_KEYS } from '../report/generated/catalogue';
import type { Breakdown } from '../report/generated/report';
import { approxTextWidth, chartFrame, fitText } from './frame';
import { formatMs, formatPct } from './format';

export type BreakdownKey = keyof Breakdown | 'unattributed';

/** In the order the bar is drawn: the GPU's own work first, then what kept it waiting. */
export const BREAKDOWN_LABELS: Record<BreakdownKey, string> = {
  compute: 'GPU compute',
  data_wait: 'Waiting for data',
  copy: 'Host-device copies',
  sync_stall: 'Sync stalls',
  launch_overhead: 'Kernel launch overhead',
  other_cpu: 'Other CPU work',
  communication: 'Communication',
  between_steps: 'Between steps (evaluation, checkpoints, epoch starts)',
  unattributed: 'Unattributed'
};

/** On a CPU run the compute is the host's: no GPU claim in the label. */
export const CPU_COMPUTE_LABEL = 'Compute (CPU)';

export interface BreakdownSegment {
  key: BreakdownKey;
  label: string;
  ms: number;
  /** Share of the step, 0-100. */
  pct: number;
  /** Where the segment starts, in ms from the left of the bar. */
  start: number;
  /** "12.3 ms (45.1%)" */
  text: string;
}

/**
 * Non-zero categories as bar segments. When the categories add up to less than the measured step
 * time, the rest is shown as "Unattributed" rather than stretching the known parts to fill it.
 */
export function breakdownSegments(
  breakdown: Breakdown,
  stepTimeMs?: number,
  gpu = true
): BreakdownSegment[] {
  // The schema's order: the GPU's own work first, then what kept it waiting.
  const parts: { key: BreakdownKey; ms: number }[] = BREAKDOWN_KEYS.map(
    key => ({
      key,
      ms: breakdown[key] ?? 0
    })
  ).filter(p => p.ms > 0 && Number.isFinite(p.ms));
  const sum = parts.reduce((acc, p) => acc + p.ms, 0);
  if (stepTimeMs !== undefined && stepTimeMs - sum > stepTimeMs * 0.01) {
    parts.push({ key: 'unattributed', ms: stepTimeMs - sum });
  }
  const total = Math.max(sum, stepTimeMs ?? 0);
  let start = 0;
  return parts.map(p => {
    const pct = total > 0 ? (p.ms / total) * 100 : 0;
    const seg: BreakdownSegment = {
      key: p.key,
      label:
        !gpu && p.key === 'compute'
          ? CPU_COMPUTE_LABEL
          : BREAKDOWN_LABELS[p.key],
      ms: p.ms,
      pct,
      start,
      text: `${formatMs(p.ms)} (${formatPct(pct)})`
    };
    start += p.ms;
    return seg;
  });
}

export interface BreakdownOptions {
  width: number;
  color: (key: BreakdownKey) => string;
}

const BAR_HEIGHT = 30;
const LEGEND_ROW = 20;
const PAD = 4;

export function renderBreakdown(
  container: Element,
  segments: BreakdownSegment[],
  opts: BreakdownOptions
): void {
  const width = opts.width;
  // Narrow (the sidebar): a legend entry that does not fit on one line takes two, its name over
  // its numbers.
  const twoLines = segments.some(
    s => 18 + approxTextWidth(`${s.label}: ${s.text}`, 12) > width - 2 * PAD
  );
  const legendRow = twoLines ? LEGEND_ROW + 14 : LEGEND_ROW;
  const height = PAD + BAR_HEIGHT + 10 + segments.length * legendRow + PAD;
  const total = segments.reduce((acc, s) => acc + s.ms, 0);
  const description = segments.length
    ? `One step of ${formatMs(total)}: ` +
      segments.map(s => `${s.label} ${s.text}`).join('; ') +
      '.'
    : 'No step-time breakdown was measured.';
  const svg = chartFrame(container, {
    width,
    height,
    label: 'Step-time breakdown',
    description,
    className: 'jp-GpusightBreakdownChart'
  });
  const x = scaleLinear()
    .domain([0, total || 1])
    .range([PAD, width - PAD]);

  const bar = svg.append('g').attr('class', 'jp-GpusightBreakdownChart-bar');
  const seg = bar
    .selectAll('g')
    .data(segments)
    .join('g')
    .attr('class', d => `jp-GpusightBreakdownChart-segment jp-mod-${d.key}`);
  seg
    .append('rect')
    .attr('class', 'jp-GpusightBreakdownChart-rect')
    .attr('x', d => x(d.start))
    .attr('y', PAD)
    // At least one pixel, so a 0.1% category is still visible.
    .attr('width', d => Math.max(1, x(d.start + d.ms) - x(d.start)))
    .attr('height', BAR_HEIGHT)
    .style('fill', d => opts.color(d.key))
    .append('title')
    .text(d => `${d.label}: ${d.text}`);
  // Percentages inside the segments that are wide enough to hold them.
  seg
    .filter(
      d =>
        x(d.start + d.ms) - x(d.start) > approxTextWidth(formatPct(d.pct)) + 8
    )
    .append('text')
    .attr('class', 'jp-GpusightBreakdownChart-inside')
    .attr('x', d => x(d.start) + (x(d.start + d.ms) - x(d.start)) / 2)
    .attr('y', PAD + BAR_HEIGHT / 2)
    .attr('dy', '0.35em')
    .attr('text-anchor', 'middle')
    .text(d => formatPct(d.pct));

  const legend = svg
    .append('g')
    .attr('class', 'jp-GpusightBreakdownChart-legend')
    .attr('transform', `translate(${PAD}, ${PAD + BAR_HEIGHT + 10})`);
  const item = legend
    .selectAll('g')
    .data(segments)
    .join('g')
    .attr('class', d => `jp-GpusightBreakdownChart-item jp-mod-${d.key}`)
    .attr('transform', (_d, i) => `translate(0, ${i * legendRow})`);
  item
    .append('rect')
    .attr('class', 'jp-GpusightBreakdownChart-swatch')
    .attr('width', 12)
    .attr('height', 12)
    .attr('y', 2)
    .style('fill', d => opts.color(d.key));
  const label = item
    .append('text')
    .attr('class', 'jp-GpusightBreakdownChart-label')
    .attr('x', 18)
    .attr('y', 8)
    .attr('dy', '0.35em');
  if (twoLines) {
    label
      .append('tspan')
      .text(d => fitText(`${d.label}:`, width - 2 * PAD - 18));
    label
      .append('tspan')
      .attr('x', 18)
      .attr('dy', '1.25em')
      .text(d => d.text);
  } else {
    label.text(d => `${d.label}: ${d.text}`);
  }
}
