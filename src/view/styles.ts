/**
 * Styles shared by the report's elements. Each element renders in its own shadow root (the same
 * markup in a notebook output, the sidebar and an exported HTML file, untouched by page CSS);
 * CSS variables cross shadow boundaries, so --jp-* theme variables still restyle everything.
 */
import { css } from 'lit';

export const baseStyles = css`
  :host {
    display: block;
    box-sizing: border-box;
    color: var(--jp-ui-font-color1);
    font-family: var(--jp-ui-font-family);
    font-size: var(--jp-ui-font-size1);
    line-height: 1.4;
  }
  :host([hidden]) {
    display: none;
  }
  *,
  *::before,
  *::after {
    box-sizing: inherit;
  }
  h2,
  h3,
  h4 {
    margin: 0 0 var(--jp-ui-font-size0);
    font-weight: 600;
    color: var(--jp-ui-font-color0);
  }
  h2 {
    font-size: var(--jp-ui-font-size3);
  }
  h3 {
    font-size: var(--jp-ui-font-size2);
  }
  h4 {
    font-size: var(--jp-ui-font-size1);
  }
  /* Present for screen readers, invisible on screen: the charts' text equivalents. */
  .jp-Gpusight-srOnly {
    position: absolute;
    width: 1px;
    height: 1px;
    padding: 0;
    margin: -1px;
    overflow: hidden;
    clip: rect(0 0 0 0);
    white-space: nowrap;
    border: 0;
  }
  .jp-Gpusight-muted {
    color: var(--jp-ui-font-color2);
  }
  code,
  pre {
    font-family: var(--jp-code-font-family);
    font-size: var(--jp-code-font-size);
  }
  p,
  li,
  summary,
  code {
    overflow-wrap: anywhere;
  }
  button {
    font: inherit;
    color: var(--jp-ui-font-color1);
    background: var(--jp-layout-color2);
    border: var(--jp-border-width) solid var(--jp-border-color1);
    border-radius: var(--jp-border-radius);
    padding: 2px 10px;
    cursor: pointer;
  }
  button:hover {
    background: var(--jp-layout-color3);
  }
  button:focus-visible,
  .jp-GpusightChart-host:focus-visible {
    outline: 2px solid var(--jp-brand-color1);
    outline-offset: 1px;
  }
  /* Chart text and axes: colors come from the theme, data colors are set by the charts. */
  /* Every chart stays in its frame: a mark past the edge is cut there, never drawn over the card. */
  .jp-GpusightChart {
    display: block;
    max-width: 100%;
    overflow: hidden;
  }
  /* Readable at any theme's smallest size: never below 11 px. */
  .jp-GpusightChart text {
    fill: var(--jp-ui-font-color1);
    font-family: var(--jp-ui-font-family);
    font-size: max(11px, var(--jp-ui-font-size0));
  }
  .jp-GpusightChart-axis path,
  .jp-GpusightChart-axis line {
    stroke: var(--jp-border-color1);
  }
  .jp-GpusightChart-axis text {
    fill: var(--jp-ui-font-color1);
  }
  table.jp-Gpusight-table {
    border-collapse: collapse;
    width: 100%;
  }
  /* Long values (paths, versions, ids) wrap inside their cell instead of widening the table;
     break-word, not anywhere: a column is never squeezed below its longest word. */
  .jp-Gpusight-table th,
  .jp-Gpusight-table td {
    overflow-wrap: break-word;
    text-align: left;
    padding: 2px 8px 2px 0;
    vertical-align: top;
    border-bottom: var(--jp-border-width) solid var(--jp-border-color2);
  }
  .jp-Gpusight-table th {
    font-weight: 600;
    color: var(--jp-ui-font-color2);
  }
`;

/** Card-like section used by each part of the report. */
export const sectionStyles = css`
  :host {
    margin: 0 0 12px;
    /* The card's own width decides its layout (the sidebar is narrow, a notebook wide). */
    container-type: inline-size;
  }
  /* Narrow: a stackable table shows each row as a block, each cell named by its data-label. */
  @container (max-width: 420px) {
    table.jp-mod-stack thead {
      display: none;
    }
    table.jp-mod-stack tr {
      display: block;
      padding: 4px 0;
      border-bottom: var(--jp-border-width) solid var(--jp-border-color2);
    }
    table.jp-mod-stack th,
    table.jp-mod-stack td {
      display: block;
      border: none;
      padding: 0;
    }
    table.jp-mod-stack td[data-label]::before {
      content: attr(data-label) ': ';
      color: var(--jp-ui-font-color2);
    }
  }
  section {
    border: var(--jp-border-width) solid var(--jp-border-color2);
    border-radius: var(--jp-border-radius);
    background: var(--jp-layout-color1);
    padding: 8px 12px;
  }
`;
