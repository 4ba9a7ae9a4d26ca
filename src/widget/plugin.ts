/**
 * The widget plugin: registers the report widget with ipywidgets, and turns a fix card's
 * `gs-insert-cell` event into a new code cell below the output that showed it (never run).
 * Both needs are optional: without ipywidgets or a notebook, the rest of gpusight still loads.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { IJupyterWidgetRegistry } from '@jupyter-widgets/base';
import { INotebookTracker, NotebookActions } from '@jupyterlab/notebook';
import { INSERT_CELL_EVENT, type InsertCellDetail } from '../view/fix-card';
import { ReportModel } from './model';
import { MODULE_NAME, MODULE_VERSION } from './version';
import { ReportView } from './view';

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
  const panel =
    (origin && tracker.find(p => p.node.contains(origin))) ||
    tracker.currentWidget ||
    null;
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
  return true;
}

export const widgetPlugin: JupyterFrontEndPlugin<void> = {
  id: 'gpusight:widget',
  description:
    'The gpusight report widget for notebooks, with "Insert cell below" for fixes.',
  autoStart: true,
  optional: [IJupyterWidgetRegistry, INotebookTracker],
  activate: (
    app: JupyterFrontEnd,
    registry: IJupyterWidgetRegistry | null,
    tracker: INotebookTracker | null
  ) => {
    if (tracker) {
      ReportView.insertable = true;
      app.shell.node.addEventListener(INSERT_CELL_EVENT, (event: Event) => {
        const detail = (event as CustomEvent<InsertCellDetail>).detail;
        if (!detail || typeof detail.code !== 'string' || !detail.code) {
          return;
        }
        // The event is composed: at the shell its target is the <gs-report> in the output area.
        const origin = event.target instanceof Node ? event.target : null;
        if (insertCellBelow(tracker, origin, detail.code)) {
          event.preventDefault();
        }
      });
    }
    if (!registry) {
      console.warn(
        'gpusight: ipywidgets is not available; the report widget is disabled.'
      );
      return;
    }
    registry.registerWidget({
      name: MODULE_NAME,
      version: MODULE_VERSION,
      exports: { ReportModel, ReportView }
    });
  }
};
