/** Theme colors for the marks the bar charts draw (data colors are set inline by the charts). */
import { css } from 'lit';

export const chartStyles = css`
  .jp-GpusightCeilingsChart-track {
    fill: var(--jp-layout-color2);
  }
  .jp-GpusightCeilingsChart-ceiling {
    stroke-width: 2px;
  }
  .jp-GpusightCeilingsChart-spread,
  .jp-GpusightSpeedupsChart-whisker {
    stroke: var(--jp-ui-font-color0);
    stroke-width: 1.25px;
    fill: none;
  }
  .jp-GpusightCeilingsChart-row.jp-mod-skipped text,
  .jp-GpusightSpeedupsChart-row.jp-mod-skipped text {
    fill: var(--jp-ui-font-color2);
    font-style: italic;
  }
  .jp-GpusightSpeedupsChart-baseline {
    fill: none;
    stroke: var(--jp-ui-font-color2);
    stroke-dasharray: 3 3;
  }
  .jp-GpusightChart text.jp-GpusightSweepChart-pointLabel {
    fill: var(--jp-ui-font-color2);
  }
  .jp-GpusightSweepChart-line {
    stroke-width: 1.5px;
  }
  details summary {
    cursor: pointer;
    color: var(--jp-ui-font-color2);
  }
`;
