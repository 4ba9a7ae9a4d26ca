import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { downloadReportHtml } from './export/download';
import { setReportExporter } from './export/exporter';
import { mimePlugin } from './mime/plugin';
import { sidebarPlugin } from './sidebar/plugin';
import { widgetPlugin } from './widget/plugin';

/** The plugin id; also the key of its settings (schema/plugin.json). */
const PLUGIN_ID = 'gpusight:plugin';

/** The gpusight labextension: one plugin. */
const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description:
    'Why is my GPU idle? Report widget, sidebar monitor and fix cards.',
  autoStart: true,
  // Optional: gpusight works with its defaults where no setting registry is available.
  optional: [ISettingRegistry],
  activate: (
    _app: JupyterFrontEnd,
    settingRegistry: ISettingRegistry | null
  ) => {
    console.log('gpusight extension activated');
    // Every <gs-report> in the lab (notebook widget, sidebar) offers "Export HTML".
    setReportExporter(downloadReportHtml);
    if (!settingRegistry) {
      return;
    }
    settingRegistry
      .load(PLUGIN_ID)
      .then(settings => {
        const log = () =>
          console.debug('gpusight settings', settings.composite);
        log();
        settings.changed.connect(log);
      })
      .catch(reason => {
        // A broken user settings file must not stop the extension: the defaults still apply.
        console.warn(
          'gpusight: settings could not be loaded, using the defaults.',
          reason
        );
      });
  }
};

// The report widget is a plugin of its own: it uses ipywidgets and the notebook only if present.
// Reports shown as cell results draw through the MIME renderer plugin.
export default [plugin, widgetPlugin, mimePlugin, sidebarPlugin];
