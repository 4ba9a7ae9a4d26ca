/**
 * "Insert cell below" for fix cards: a `<gs-report>` anywhere in the lab (the widget, the report
 * MIME renderer) fires `gs-insert-cell`, and one listener on the shell turns it into a new code
 * cell below the output that showed it (never run).
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import { type INotebookTracker, NotebookActions } from '@jupyterlab/notebook';
import { INSERT_CELL_EVENT, type InsertCellDetail } from '../view/fix-card';
import { onceOnShell, panelOf } from './shell-events';

/**
 * Insert `code` as a new code cell below the cell whose output holds `origin`; when the output is
 * not in a notebook (a linked output view, the sidebar), below the active cell of the current
 * notebook. Returns whether a cell was inserted.
 */
export function insertCellBelow(
  tracker: INotebookTracker,
  origin: Node | null,
  code: string
): boolean {
  const panel = panelOf(tracker, origin);
  if (!panel) {
    return false;
  }
  const notebook = panel.content;
  const index = origin
    ? notebook.widgets.findIndex(cell => cell.node.contains(origin))
    : -1;
  if (index >= 0) {
    notebook.activeCellIndex = index;
  }
  NotebookActions.insertBelow(notebook);
  if (notebook.activeCell && notebook.activeCell.model.type !== 'code') {
    NotebookActions.changeCellType(notebook, 'code');
  }
  const cell = notebook.activeCell;
  if (!cell) {
    return false;
  }
  cell.model.sharedModel.setSource(code);
  // The new cell may be below the fold (the report above it is tall): bring it into view.
  void notebook.scrollToCell(cell, 'auto');
  return true;
}

/** Handle `gs-insert-cell` from every report in the shell (once, however often called). */
export function listenForInsertCell(
  app: JupyterFrontEnd,
  tracker: INotebookTracker
): void {
  onceOnShell(app, INSERT_CELL_EVENT, shell =>
    shell.addEventListener(INSERT_CELL_EVENT, (event: Event) => {
      const detail = (event as CustomEvent<InsertCellDetail>).detail;
      if (!detail || typeof detail.code !== 'string' || !detail.code) {
        return;
      }
      // The event is composed: at the shell its target is the <gs-report> in the output area.
      const origin = event.target instanceof Node ? event.target : null;
      if (insertCellBelow(tracker, origin, detail.code)) {
        event.preventDefault();
      }
    })
  );
}
