import { LabIcon } from '@jupyterlab/ui-components';

/** A GPU card with a fan: the sidebar tab's icon; jp-icon3 takes the theme's icon color. */
const GPU_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M2 6h18a2 2 0 0 1 2 2v8a2 2 0 0 1-2 2h-4v2h-2v-2H8v2H6v-2H4v2H2V6zm2 2v8h16V8H4z"/>
    <path d="M9 9a3 3 0 1 1 0 6 3 3 0 0 1 0-6zm0 2a1 1 0 1 0 0 2 1 1 0 0 0 0-2z"/>
    <path d="M14 9h4v2h-4zM14 13h4v2h-4z"/>
  </g>
</svg>`;

export const gpuIcon = new LabIcon({ name: 'gpusight:gpu', svgstr: GPU_SVG });
