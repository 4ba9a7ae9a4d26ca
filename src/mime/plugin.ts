/**
 * The report MIME renderer plugin: registers `application/vnd.gpusight.report+json` with
 * JupyterLab's render-mime registry, and "Insert cell below" for its fix cards where a notebook
 * can take the cell (the same listener as the widget's: src/notebook/insert-cell.ts).
 *
 * A plugin rather than a `mimeExtension`: it needs the notebook tracker, which a mime extension
 * cannot ask for.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { listenForCellActions } from '../notebook/cell-actions';
import { listenForInsertCell } from '../notebook/insert-cell';
import { createReportRendererFactory } from './renderer';

export const mimePlugin: JupyterFrontEndPlugin<void> = {
  id: 'gpusight:mime',
  description:
    'Draws gpusight reports in notebook outputs, also in saved notebooks without a kernel.',
  autoStart: true,
  requires: [IRenderMimeRegistry],
  optional: [INotebookTracker],
  activate: (
    app: JupyterFrontEnd,
    rendermime: IRenderMimeRegistry,
    tracker: INotebookTracker | null
  ) => {
    if (tracker) {
      listenForInsertCell(app, tracker);
      listenForCellActions(app, tracker);
    }
    // Notebooks clone the registry when they open; plugins activate before any is restored.
    rendermime.addFactory(
      createReportRendererFactory({ insertable: tracker !== null })
    );
  }
};
