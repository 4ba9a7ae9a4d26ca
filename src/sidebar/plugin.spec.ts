// @vitest-environment happy-dom
/**
 * The sidebar plugin hands its panel to JupyterLab's layout restorer under a stable name, so a
 * panel open before a reload is open after it; without a restorer it still activates.
 */
import type { ILayoutRestorer, JupyterFrontEnd } from '@jupyterlab/application';
import type { Widget } from '@lumino/widgets';
import { describe, expect, it, vi } from 'vitest';
import { SIDEBAR_ID } from './panel';
import { sidebarPlugin } from './plugin';

// JupyterLab's packages pull in web components that need a browser: only their tokens are
// needed here. The icon likewise.
vi.mock('./icon', () => ({ gpuIcon: undefined }));
vi.mock('@jupyterlab/application', async () => {
  const { Token } = await import('@lumino/coreutils');
  return {
    ILabShell: new Token('@jupyterlab/application:ILabShell'),
    ILayoutRestorer: new Token('@jupyterlab/application:ILayoutRestorer')
  };
});
vi.mock('@jupyterlab/apputils', async () => {
  const { Token } = await import('@lumino/coreutils');
  return { ICommandPalette: new Token('@jupyterlab/apputils:ICommandPalette') };
});
vi.mock('@jupyterlab/console', async () => {
  const { Token } = await import('@lumino/coreutils');
  return { IConsoleTracker: new Token('@jupyterlab/console:IConsoleTracker') };
});
vi.mock('@jupyterlab/notebook', async () => {
  const { Token } = await import('@lumino/coreutils');
  return {
    INotebookTracker: new Token('@jupyterlab/notebook:INotebookTracker')
  };
});
vi.mock('@jupyterlab/settingregistry', async () => {
  const { Token } = await import('@lumino/coreutils');
  return {
    ISettingRegistry: new Token('@jupyterlab/settingregistry:ISettingRegistry')
  };
});

function stubApp(): { app: JupyterFrontEnd; added: Widget[] } {
  const added: Widget[] = [];
  const app = {
    shell: {
      add: (w: Widget) => added.push(w),
      activateById: () => undefined
    },
    commands: {
      addCommand: () => ({ dispose: () => undefined }),
      notifyCommandChanged: () => undefined
    }
  } as unknown as JupyterFrontEnd;
  return { app, added };
}

function activate(app: JupyterFrontEnd, restorer: ILayoutRestorer | null) {
  // The optional tokens in order: shell, notebooks, consoles, settings, palette, restorer.
  return (sidebarPlugin.activate as (...args: unknown[]) => void)(
    app,
    null,
    null,
    null,
    null,
    null,
    restorer
  );
}

describe('the sidebar plugin', () => {
  it('asks for the layout restorer (optional)', () => {
    const names = (sidebarPlugin.optional ?? []).map(t => t.name);
    expect(names).toContain('@jupyterlab/application:ILayoutRestorer');
  });

  it('gives the restorer its panel under the panel id', () => {
    const { app, added } = stubApp();
    const restored: [Widget, string][] = [];
    const restorer = {
      add: (w: Widget, name: string) => restored.push([w, name])
    } as unknown as ILayoutRestorer;
    activate(app, restorer);
    expect(added).toHaveLength(1);
    expect(restored).toEqual([[added[0], SIDEBAR_ID]]);
    expect(added[0].id).toBe(SIDEBAR_ID);
  });

  it('activates without a restorer', () => {
    const { app, added } = stubApp();
    expect(() => activate(app, null)).not.toThrow();
    expect(added).toHaveLength(1);
  });
});
