/**
 * Design tokens: every color and size the report uses, as JupyterLab CSS variables, so the light
 * and dark themes (and any third-party theme) restyle the report without a line of our CSS.
 */
import type { BreakdownKey } from '../charts/breakdown';
import type { Bottleneck, Check, Severity } from '../report';

/** A CSS var() reference; the charts set these as inline styles. */
type CssVar = `var(--jp-${string})`;

export const SEVERITY_COLOR: Record<Severity, CssVar> = {
  critical: 'var(--jp-error-color1)',
  warn: 'var(--jp-warn-color1)',
  info: 'var(--jp-info-color1)'
};

export const SEVERITY_LABEL: Record<Severity, string> = {
  critical: 'Critical',
  warn: 'Warning',
  info: 'Info'
};

export type CheckStatus = Check['status'];

export const CHECK_COLOR: Record<CheckStatus, CssVar> = {
  pass: 'var(--jp-success-color1)',
  warn: 'var(--jp-warn-color1)',
  fail: 'var(--jp-error-color1)',
  info: 'var(--jp-info-color1)',
  not_checked: 'var(--jp-ui-font-color3)'
};

/** A symbol beside the word, so status never rests on color alone. */
export const CHECK_SYMBOL: Record<CheckStatus, string> = {
  pass: '✓',
  warn: '!',
  fail: '✗',
  info: 'i',
  not_checked: '–'
};

export const CHECK_LABEL: Record<CheckStatus, string> = {
  pass: 'pass',
  warn: 'warning',
  fail: 'fail',
  info: 'info',
  not_checked: 'not checked'
};

/**
 * Step-time categories. Compute, the work we want, takes the brand color; the waits take the
 * warning/error colors in rough order of how much they usually cost.
 */
export const CATEGORY_COLOR: Record<BreakdownKey, CssVar> = {
  compute: 'var(--jp-brand-color1)',
  data_wait: 'var(--jp-warn-color1)',
  copy: 'var(--jp-error-color1)',
  sync_stall: 'var(--jp-error-color2)',
  launch_overhead: 'var(--jp-accent-color1)',
  other_cpu: 'var(--jp-warn-color2)',
  communication: 'var(--jp-info-color1)',
  between_steps: 'var(--jp-info-color2)',
  unattributed: 'var(--jp-layout-color3)'
};

export const BOTTLENECK_LABEL: Record<Bottleneck, string> = {
  environment: 'Environment',
  device_placement: 'Device placement',
  input_pipeline: 'Input pipeline',
  host_cpu: 'Host CPU',
  host_sync: 'Host-device syncs',
  memory_transfer: 'Host-device copies',
  launch_overhead: 'Kernel launch overhead',
  precision: 'Precision',
  memory_capacity: 'GPU memory capacity',
  communication: 'Communication',
  between_steps: 'Between steps (evaluation, checkpoints, epoch starts)',
  compute: 'Compute (the GPU is busy)',
  none: 'No bottleneck found'
};

/** Timeline series: GPUs in brand/accent colors, the host CPU in a muted one. */
export function seriesColor(key: string): CssVar {
  if (key === 'cpu') {
    return 'var(--jp-warn-color2)';
  }
  const gpu = Number(key.replace(/^gpu/, '')) || 0;
  const palette: CssVar[] = [
    'var(--jp-brand-color1)',
    'var(--jp-accent-color1)',
    'var(--jp-success-color1)',
    'var(--jp-info-color1)'
  ];
  return palette[gpu % palette.length];
}

/** Benchmarks: how close to the ceiling. */
export function ceilingColor(pctOfCeiling: number | null): CssVar {
  if (pctOfCeiling === null) {
    return 'var(--jp-brand-color1)';
  }
  if (pctOfCeiling >= 70) {
    return 'var(--jp-success-color1)';
  }
  if (pctOfCeiling >= 40) {
    return 'var(--jp-warn-color1)';
  }
  return 'var(--jp-error-color1)';
}

export const CEILING_MARKER_COLOR: CssVar = 'var(--jp-ui-font-color0)';

/** What-ifs: faster beyond the noise, within it (not significant), or slower. */
export function speedupColor(
  speedup: number | null,
  significant: boolean
): CssVar {
  if (speedup === null) {
    return 'var(--jp-layout-color3)';
  }
  if (!significant) {
    return 'var(--jp-layout-color4)';
  }
  return speedup > 1 ? 'var(--jp-success-color1)' : 'var(--jp-error-color1)';
}

export const SWEEP_COLOR: CssVar = 'var(--jp-brand-color1)';

/** Step-time strip: ordinary steps in the brand colour, the stalled ones in the warning one. */
export const STEP_COLOR: CssVar = 'var(--jp-brand-color1)';
export const STALL_COLOR: CssVar = 'var(--jp-warn-color1)';

/** Syntax colors: the editor's own, so a snippet looks like the cell it will become. */
export const SYNTAX_COLOR = {
  keyword: 'var(--jp-mirror-editor-keyword-color)',
  string: 'var(--jp-mirror-editor-string-color)',
  number: 'var(--jp-mirror-editor-number-color)',
  comment: 'var(--jp-mirror-editor-comment-color)',
  builtin: 'var(--jp-mirror-editor-builtin-color)',
  def: 'var(--jp-mirror-editor-def-color)',
  operator: 'var(--jp-mirror-editor-operator-color)',
  decorator: 'var(--jp-mirror-editor-meta-color)',
  variable: 'var(--jp-mirror-editor-variable-2-color)',
  flag: 'var(--jp-mirror-editor-attribute-color)'
} as const satisfies Record<string, CssVar>;

/** The speed-of-light bars: the measured ceiling in the brand color, the datasheet's muted. */
export const MFU_COLOR: Record<'measured' | 'datasheet', CssVar> = {
  measured: 'var(--jp-brand-color1)',
  datasheet: 'var(--jp-ui-font-color3)'
};

/** Sizes (px) the elements share. */
export const SIZE = {
  gap: 8,
  chartHeight: 200,
  sweepHeight: 180,
  /** Below this width the timeline hides its step boundaries unless zoomed. */
  minChartWidth: 240
} as const;
