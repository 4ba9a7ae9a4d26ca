// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';
import { INSERT_CELL_EVENT } from '../view/fix-card';
import { listenForInsertCell } from './insert-cell';

/** A notebook of plain cells; NotebookActions (mocked below) inserts into it. */
interface FakeCell {
  node: HTMLElement;
  model: { type: string; sharedModel: { setSource(code: string): void } };
  source: string;
}
interface FakeNotebook {
  widgets: FakeCell[];
  activeCellIndex: number;
  activeCell: FakeCell | null;
  scrolledTo: FakeCell[];
  scrollToCell(cell: FakeCell, align?: string): Promise<void>;
}

function cell(): FakeCell {
  const c: FakeCell = {
    node: document.createElement('div'),
    source: '',
    model: {
      type: 'code',
      sharedModel: { setSource: (code: string) => (c.source = code) }
    }
  };
  return c;
}

vi.mock('@jupyterlab/notebook', () => ({
  NotebookActions: {
    insertBelow: (nb: FakeNotebook) => {
      nb.widgets.splice(nb.activeCellIndex + 1, 0, cell());
      nb.activeCellIndex += 1;
      nb.activeCell = nb.widgets[nb.activeCellIndex];
    },
    changeCellType: () => undefined
  }
}));

function setup() {
  const shell = document.createElement('div');
  document.body.appendChild(shell);
  const panel = { node: document.createElement('div'), content: null as never };
  const notebook: FakeNotebook = {
    widgets: [cell(), cell()],
    activeCellIndex: 1,
    activeCell: null,
    scrolledTo: [],
    scrollToCell(c: FakeCell) {
      this.scrolledTo.push(c);
      return Promise.resolve();
    }
  };
  panel.content = notebook as never;
  for (const c of notebook.widgets) {
    panel.node.appendChild(c.node);
  }
  shell.appendChild(panel.node);
  const tracker = {
    find: (fn: (p: typeof panel) => boolean) => (fn(panel) ? panel : undefined),
    currentWidget: panel
  };
  return { app: { shell: { node: shell } }, tracker, notebook };
}

describe('listenForInsertCell', () => {
  it('inserts the fix below the cell whose output fired, once however many plugins ask', () => {
    const { app, tracker, notebook } = setup();
    listenForInsertCell(app as never, tracker as never);
    listenForInsertCell(app as never, tracker as never); // the widget and the MIME plugin
    const output = document.createElement('gs-report');
    notebook.widgets[0].node.appendChild(output);
    const event = new CustomEvent(INSERT_CELL_EVENT, {
      detail: { code: 'x = 1' },
      bubbles: true,
      composed: true,
      cancelable: true
    });
    output.dispatchEvent(event);
    expect(notebook.widgets).toHaveLength(3);
    expect(notebook.widgets[1].source).toBe('x = 1');
    // Scrolled into view (issue #36: the new cell could sit below the fold, unseen).
    expect(notebook.scrolledTo).toEqual([notebook.widgets[1]]);
    // Handled: the fix card says "Inserted below".
    expect(event.defaultPrevented).toBe(true);
  });

  it('ignores an event without code', () => {
    const { app, tracker, notebook } = setup();
    listenForInsertCell(app as never, tracker as never);
    const event = new CustomEvent(INSERT_CELL_EVENT, {
      detail: { code: '' },
      bubbles: true,
      cancelable: true
    });
    notebook.widgets[0].node.dispatchEvent(event);
    expect(notebook.widgets).toHaveLength(2);
    expect(event.defaultPrevented).toBe(false);
  });
});
