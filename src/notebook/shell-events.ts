/**
 * What the fix cards' notebook actions share: the notebook that shows a report, and one listener
 * per shell for each kind of event (each plugin that shows reports asks; one answers).
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

/**
 * The notebook whose output holds `origin` (the `<gs-report>` that fired the event); when the
 * report is not in a notebook (a linked output view, the sidebar), the current notebook.
 */
export function panelOf(
  tracker: INotebookTracker,
  origin: Node | null
): NotebookPanel | null {
  return (
    (origin && tracker.find(p => p.node.contains(origin))) ||
    tracker.currentWidget ||
    null
  );
}

const installed = new Map<string, WeakSet<HTMLElement>>();

/** Run `install` on the app's shell once for `kind`, however often it is asked. */
export function onceOnShell(
  app: JupyterFrontEnd,
  kind: string,
  install: (shell: HTMLElement) => void
): void {
  const shell = app.shell.node;
  let shells = installed.get(kind);
  if (!shells) {
    shells = new WeakSet<HTMLElement>();
    installed.set(kind, shells);
  }
  if (shells.has(shell)) {
    return;
  }
  shells.add(shell);
  install(shell);
}
