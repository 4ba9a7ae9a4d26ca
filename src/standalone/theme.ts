/**
 * Default theme for reports shown outside JupyterLab (an exported file, nbconvert's classic
 * template, VS Code, Colab). The elements style themselves with --jp-* variables only; where the
 * page defines none, these values (JupyterLab 4.5's light theme, and its dark theme for
 * `prefers-color-scheme: dark`) are set on the report's container. Where the page has its own
 * --jp-* variables (JupyterLab, nbconvert's lab template), the page's theme wins untouched.
 *
 * Values are the resolved ones of @jupyterlab/theme-light-extension and theme-dark-extension;
 * theme.spec.ts checks that every variable the elements use is defined in both.
 */

/** Class set on a container that gets the default theme. */
export const THEME_CLASS = 'jp-GpusightTheme';

/** Marks the one <style> element holding the default theme in a document. */
export const THEME_STYLE_ATTRIBUTE = 'data-gpusight-theme';

/** The variable whose absence means "this page has no JupyterLab theme". */
export const PROBE_VARIABLE = '--jp-layout-color1';

const SHARED: Record<string, string> = {
  '--jp-border-radius': '2px',
  '--jp-border-width': '1px',
  '--jp-code-font-family': 'menlo, consolas, "DejaVu Sans Mono", monospace',
  '--jp-code-font-size': '13px',
  '--jp-ui-font-family':
    'system-ui, -apple-system, blinkmacsystemfont, "Segoe UI", helvetica, arial, sans-serif, "Apple Color Emoji", "Segoe UI Emoji", "Segoe UI Symbol"',
  '--jp-ui-font-size0': '0.83333em',
  '--jp-ui-font-size1': '13px',
  '--jp-ui-font-size2': '1.2em',
  '--jp-ui-font-size3': '1.44em'
};

export const LIGHT_THEME: Readonly<Record<string, string>> = {
  ...SHARED,
  '--jp-accent-color1': '#388e3c',
  '--jp-border-color1': '#bdbdbd',
  '--jp-border-color2': '#e0e0e0',
  '--jp-brand-color1': '#1976d2',
  '--jp-cell-editor-background': '#f5f5f5',
  '--jp-cell-editor-border-color': '#e0e0e0',
  '--jp-content-font-color1': 'rgba(0, 0, 0, 0.87)',
  '--jp-error-color1': '#d32f2f',
  '--jp-error-color2': '#e57373',
  '--jp-info-color1': '#0097a7',
  '--jp-info-color2': '#4dd0e1',
  '--jp-layout-color0': '#fff',
  '--jp-layout-color1': '#fff',
  '--jp-layout-color2': '#eee',
  '--jp-layout-color3': '#bdbdbd',
  '--jp-layout-color4': '#757575',
  '--jp-mirror-editor-attribute-color': '#00c',
  '--jp-mirror-editor-builtin-color': '#008000',
  '--jp-mirror-editor-comment-color': '#408080',
  '--jp-mirror-editor-def-color': '#00f',
  '--jp-mirror-editor-keyword-color': '#008000',
  '--jp-mirror-editor-meta-color': '#a2f',
  '--jp-mirror-editor-number-color': '#080',
  '--jp-mirror-editor-operator-color': '#7800c2',
  '--jp-mirror-editor-string-color': '#ba2121',
  '--jp-mirror-editor-variable-2-color': '#00366d',
  '--jp-success-color1': '#388e3c',
  '--jp-ui-font-color0': '#000',
  '--jp-ui-font-color1': 'rgba(0, 0, 0, 0.87)',
  '--jp-ui-font-color2': 'rgba(0, 0, 0, 0.54)',
  '--jp-ui-font-color3': 'rgba(0, 0, 0, 0.38)',
  '--jp-ui-inverse-font-color0': '#fff',
  '--jp-warn-color1': '#f57c00',
  '--jp-warn-color2': '#ffb74d'
};

export const DARK_THEME: Readonly<Record<string, string>> = {
  ...SHARED,
  '--jp-accent-color1': '#4caf50',
  '--jp-border-color1': '#616161',
  '--jp-border-color2': '#424242',
  '--jp-brand-color1': '#2196f3',
  '--jp-cell-editor-background': '#212121',
  '--jp-cell-editor-border-color': '#616161',
  '--jp-content-font-color1': '#fff',
  '--jp-error-color1': '#f44336',
  '--jp-error-color2': '#e57373',
  '--jp-info-color1': '#00bcd4',
  '--jp-info-color2': '#4dd0e1',
  '--jp-layout-color0': '#111',
  '--jp-layout-color1': '#212121',
  '--jp-layout-color2': '#424242',
  '--jp-layout-color3': '#616161',
  '--jp-layout-color4': '#757575',
  '--jp-mirror-editor-attribute-color': '#64b5f6',
  '--jp-mirror-editor-builtin-color': '#43a047',
  '--jp-mirror-editor-comment-color': '#408080',
  '--jp-mirror-editor-def-color': '#1e88e5',
  '--jp-mirror-editor-keyword-color': '#4caf50',
  '--jp-mirror-editor-meta-color': '#a2f',
  '--jp-mirror-editor-number-color': '#66bb6a',
  '--jp-mirror-editor-operator-color': '#d48fff',
  '--jp-mirror-editor-string-color': '#ff7070',
  '--jp-mirror-editor-variable-2-color': '#2196f3',
  '--jp-success-color1': '#4caf50',
  '--jp-ui-font-color0': '#fff',
  '--jp-ui-font-color1': 'rgba(255, 255, 255, 0.87)',
  '--jp-ui-font-color2': 'rgba(255, 255, 255, 0.54)',
  '--jp-ui-font-color3': 'rgba(255, 255, 255, 0.38)',
  '--jp-ui-inverse-font-color0': '#000',
  '--jp-warn-color1': '#ff9800',
  '--jp-warn-color2': '#ffb74d'
};

function declarations(theme: Readonly<Record<string, string>>): string {
  return Object.entries(theme)
    .map(([name, value]) => `${name}: ${value};`)
    .join(' ');
}

/** The stylesheet: light by default, dark where the reader's system asks for it. */
export function themeCss(): string {
  const base = `color: var(--jp-ui-font-color1); background: var(--jp-layout-color0); font-family: var(--jp-ui-font-family); font-size: var(--jp-ui-font-size1);`;
  return (
    `.${THEME_CLASS} { ${declarations(LIGHT_THEME)} ${base} color-scheme: light; }\n` +
    `@media (prefers-color-scheme: dark) { .${THEME_CLASS} { ${declarations(DARK_THEME)} color-scheme: dark; } }\n`
  );
}

/** Whether the page already defines JupyterLab's theme variables where `host` sits. */
export function hasPageTheme(host: Element): boolean {
  const view = host.ownerDocument.defaultView;
  if (!view) {
    return false;
  }
  return (
    view.getComputedStyle(host).getPropertyValue(PROBE_VARIABLE).trim() !== ''
  );
}

/**
 * Give `host` the default theme unless the page has one. Returns whether it did. The stylesheet
 * is added to the document once, however many reports the page holds.
 */
export function ensureTheme(host: HTMLElement): boolean {
  if (host.classList.contains(THEME_CLASS)) {
    return true;
  }
  if (hasPageTheme(host)) {
    return false;
  }
  const doc = host.ownerDocument;
  if (!doc.querySelector(`style[${THEME_STYLE_ATTRIBUTE}]`)) {
    const style = doc.createElement('style');
    style.setAttribute(THEME_STYLE_ATTRIBUTE, '');
    style.textContent = themeCss();
    (doc.head ?? doc.documentElement).append(style);
  }
  host.classList.add(THEME_CLASS);
  return true;
}
