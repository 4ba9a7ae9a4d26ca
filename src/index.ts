import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';

/** The gpusight labextension: one plugin. */
const plugin: JupyterFrontEndPlugin<void> = {
  id: 'gpusight:plugin',
  description: 'Why is my GPU idle? Report widget, sidebar monitor and fix cards.',
  autoStart: true,
  activate: (_app: JupyterFrontEnd) => {
    console.log('gpusight extension activated');
  }
};

export default plugin;
