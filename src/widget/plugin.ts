/**
 * The widget plugin: registers the report widget with ipywidgets, and turns a fix card's
 * `gs-insert-cell` event into a new code cell below the output that showed it (never run;
 * src/notebook/insert-cell.ts), and "Show the cell" / "Apply to that cell" for fixes of an
 * earlier cell (src/notebook/cell-actions.ts).
 * Both needs are optional: without ipywidgets or a notebook, the rest of gpusight still loads.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { IJupyterWidgetRegistry } from '@jupyter-widgets/base';
import { INotebookTracker } from '@jupyterlab/notebook';
import { listenForCellActions } from '../notebook/cell-actions';
import { listenForInsertCell } from '../notebook/insert-cell';
import { ReportModel } from './model';
import { MODULE_NAME, MODULE_VERSION } from './version';
import { ReportView } from './view';

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
      listenForInsertCell(app, tracker);
      listenForCellActions(app, tracker);
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
