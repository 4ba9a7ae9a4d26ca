/**
 * The sidebar plugin: the "GPU" panel in the left area, its commands in the palette, and the
 * settings (schema/plugin.json, plugin id `gpusight:plugin`) applied live.
 */
import {
  ILabShell,
  ILayoutRestorer,
  type JupyterFrontEnd,
  type JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IConsoleTracker } from '@jupyterlab/console';
import { INotebookTracker } from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ActiveKernelFollower } from './follower';
import { gpuIcon } from './icon';
import { GpusightSidebar, SIDEBAR_ID } from './panel';
import { readSettings, SETTINGS_ID } from './settings';

export const CommandIDs = {
  open: 'gpusight:open-sidebar',
  check: 'gpusight:check',
  benchmark: 'gpusight:benchmark',
  watch: 'gpusight:watch-next-cell',
  export: 'gpusight:export'
} as const;

export const sidebarPlugin: JupyterFrontEndPlugin<void> = {
  id: 'gpusight:sidebar',
  description:
    'GPU sidebar: live monitor and one-click diagnosis for the active kernel.',
  autoStart: true,
  optional: [
    ILabShell,
    INotebookTracker,
    IConsoleTracker,
    ISettingRegistry,
    ICommandPalette,
    ILayoutRestorer
  ],
  activate: (
    app: JupyterFrontEnd,
    labShell: ILabShell | null,
    notebooks: INotebookTracker | null,
    consoles: IConsoleTracker | null,
    settingRegistry: ISettingRegistry | null,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null
  ) => {
    const panel = new GpusightSidebar();
    panel.title.caption = 'GPU';
    app.shell.add(panel, 'left', { rank: 850 });
    // Open before a reload, open after it (JupyterLab saves the left area's current widget).
    restorer?.add(panel, SIDEBAR_ID);

    const follower = new ActiveKernelFollower({
      labShell,
      notebooks,
      consoles,
      onChange: target => panel.follow(target)
    });
    panel.follow(follower.target);
    panel.disposed.connect(() => follower.dispose());

    const { commands } = app;
    panel.onCommandsChanged = () => {
      for (const id of [
        CommandIDs.check,
        CommandIDs.benchmark,
        CommandIDs.watch,
        CommandIDs.export
      ]) {
        commands.notifyCommandChanged(id);
      }
    };
    commands.addCommand(CommandIDs.open, {
      label: 'GPU: Open the gpusight Sidebar',
      icon: gpuIcon,
      execute: () => app.shell.activateById(panel.id)
    });
    commands.addCommand(CommandIDs.check, {
      label: 'GPU: Check the Kernel Environment',
      isEnabled: () => panel.canRun,
      execute: () => {
        app.shell.activateById(panel.id);
        return panel.check();
      }
    });
    commands.addCommand(CommandIDs.benchmark, {
      label: 'GPU: Benchmark the Hardware',
      isEnabled: () => panel.canRun,
      execute: () => {
        app.shell.activateById(panel.id);
        return panel.benchmark();
      }
    });
    commands.addCommand(CommandIDs.watch, {
      label: 'GPU: Watch the Next Cell',
      isEnabled: () => panel.canWatch,
      isToggled: () => panel.isArmed,
      execute: () => panel.toggleWatch()
    });
    commands.addCommand(CommandIDs.export, {
      label: 'GPU: Export the Report as HTML',
      isEnabled: () => panel.canExport,
      execute: () => panel.exportReport()
    });
    if (palette) {
      for (const command of Object.values(CommandIDs)) {
        palette.addItem({ command, category: 'gpusight' });
      }
    }

    if (settingRegistry) {
      settingRegistry
        .load(SETTINGS_ID)
        .then(settings => {
          const apply = () =>
            panel.setSettings(readSettings(settings.composite));
          apply();
          settings.changed.connect(apply);
        })
        .catch(reason => {
          console.warn(
            'gpusight sidebar: settings not loaded, using the defaults.',
            reason
          );
        });
    }
  }
};
