// @vitest-environment happy-dom
import { describe, expect, it, vi } from 'vitest';
import type { CellPatch } from '../report';
import {
  APPLY_CELL_EVENT,
  SHOW_CELL_EVENT,
  VERIFY_CELL_EVENT
} from '../view/fix-card';
import { listenForCellActions, SHOWN_CELL_CLASS } from './cell-actions';

/** NotebookActions, as "Verify" uses them: runs recorded, a cell inserted below the active one. */
const runs: string[] = [];
vi.mock('@jupyterlab/notebook', () => ({
  NotebookActions: {
    run: async (nb: { widgets: FakeNbCell[]; activeCellIndex: number }) => {
      runs.push(nb.widgets[nb.activeCellIndex].model.sharedModel.getSource());
      return true;
    },
    insertBelow: (nb: {
      widgets: FakeNbCell[];
      activeCellIndex: number;
      activeCell?: FakeNbCell;
    }) => {
      let text = '';
      const inserted: FakeNbCell = {
        node: document.createElement('div'),
        model: {
          type: 'code',
          sharedModel: {
            getSource: () => text,
            setSource: (t: string) => (text = t)
          }
        }
      };
      nb.widgets.splice(nb.activeCellIndex + 1, 0, inserted);
      nb.activeCellIndex += 1;
      nb.activeCell = inserted;
    }
  }
}));
interface FakeNbCell {
  node: HTMLElement;
  model: {
    type: string;
    sharedModel: { getSource(): string; setSource?(t: string): void };
  };
}

const SOURCE =
  'from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=0)';
const TARGET: CellPatch = {
  source: SOURCE,
  patched: SOURCE.replace('num_workers=0', 'num_workers=4'),
  line: 2,
  end_line: 2,
  execution_count: 3,
  label: 'cell [3]'
};

/** A notebook cell: its shared model keeps the text and counts edits; an editor records selections. */
function cell(source: string, executionCount: number | null) {
  const edits: [number, number, string][] = [];
  const selections: unknown[] = [];
  const shared = {
    text: source,
    getSource: () => shared.text,
    updateSource(start: number, end: number, value = '') {
      edits.push([start, end, value]);
      shared.text =
        shared.text.slice(0, start) + value + shared.text.slice(end);
    }
  };
  return {
    node: document.createElement('div'),
    ready: Promise.resolve(),
    model: { type: 'code', executionCount, sharedModel: shared },
    editor: {
      get lineCount() {
        return shared.text.split('\n').length;
      },
      getLine: (i: number) => shared.text.split('\n')[i],
      setSelection: (s: unknown) => selections.push(s),
      revealPosition: () => undefined
    },
    edits,
    selections
  };
}

function setup(cells: ReturnType<typeof cell>[]) {
  const shell = document.createElement('div');
  document.body.appendChild(shell);
  const scrolled: unknown[] = [];
  const notebook = {
    widgets: cells,
    activeCellIndex: 0,
    scrollToCell: async (c: unknown) => {
      scrolled.push(c);
    }
  };
  const panel = { node: document.createElement('div'), content: notebook };
  for (const c of cells) {
    panel.node.appendChild(c.node);
  }
  const output = document.createElement('gs-report');
  cells[cells.length - 1].node.appendChild(output);
  shell.appendChild(panel.node);
  const tracker = {
    find: (fn: (p: typeof panel) => boolean) => (fn(panel) ? panel : undefined),
    currentWidget: panel
  };
  listenForCellActions({ shell: { node: shell } } as never, tracker as never);
  const fire = (name: string) => {
    const detail = {
      cell: TARGET,
      findingId: 'load.input_bound',
      status: null
    };
    const event = new CustomEvent(name, {
      detail,
      bubbles: true,
      composed: true,
      cancelable: true
    });
    output.dispatchEvent(event);
    return {
      handled: event.defaultPrevented,
      status: detail.status as string | null,
      applied: (detail as { applied?: boolean }).applied === true
    };
  };
  return { notebook, scrolled, fire };
}

const settle = () => new Promise(resolve => setTimeout(resolve, 0));

describe('listenForCellActions', () => {
  it('applies the patch to the cell that ran it, in one edit, without running it', async () => {
    const cells = [
      cell('%load_ext gpusight', 1),
      cell(`${SOURCE}\n`, 3),
      cell('%%gpusight\nfor b in loader: pass', 4)
    ];
    const { notebook, fire } = setup(cells);
    const { handled, status } = fire(APPLY_CELL_EVENT);
    expect(handled).toBe(true);
    expect(status).toBe(
      'Applied to cell [3] (not run; undo in the cell takes it back)'
    );
    expect(cells[1].model.sharedModel.getSource()).toBe(`${TARGET.patched}\n`);
    expect(cells[1].edits).toEqual([
      [SOURCE.indexOf('0)'), SOURCE.indexOf('0)') + 1, '4']
    ]);
    expect(cells[0].edits).toEqual([]);
    expect(cells[2].edits).toEqual([]);
    await settle();
    expect(notebook.activeCellIndex).toBe(1);
  });

  it('refuses a cell whose text changed since the watch, and leaves it alone', () => {
    const edited = SOURCE.replace('ds', 'other_ds');
    const cells = [cell(edited, 3), cell('x', 4)];
    const { fire } = setup(cells);
    const { status } = fire(APPLY_CELL_EVENT);
    expect(status).toMatch(
      /^Not applied: cell \[3\] has changed since the watch ran/
    );
    expect(cells[0].model.sharedModel.getSource()).toBe(edited);
    expect(cells[0].edits).toEqual([]);
  });

  it("shows the cell: scrolls to it, selects the call's lines, marks it for a moment", async () => {
    const cells = [cell('a = 1', 1), cell(SOURCE, 3), cell('x', 4)];
    const { notebook, scrolled, fire } = setup(cells);
    expect(fire(SHOW_CELL_EVENT).status).toBe('Shown: cell [3], line 2');
    await settle();
    expect(scrolled).toEqual([cells[1]]);
    expect(notebook.activeCellIndex).toBe(1);
    expect(cells[1].selections).toEqual([
      {
        start: { line: 1, column: 0 },
        end: {
          line: 1,
          column: 'loader = DataLoader(ds, num_workers=0)'.length
        }
      }
    ]);
    expect(cells[1].node.classList.contains(SHOWN_CELL_CLASS)).toBe(true);
    expect(cells[1].edits).toEqual([]); // showing never edits
  });

  it('says so when the notebook has no such cell', () => {
    const { fire } = setup([cell('a = 1', 1), cell('x', 2)]);
    expect(fire(SHOW_CELL_EVENT).status).toBe(
      'cell [3] is not in this notebook'
    );
    expect(fire(APPLY_CELL_EVENT).status).toMatch(
      /^Not applied: cell \[3\] is not in this notebook/
    );
  });

  it('says a change was applied (the card then offers Verify), and not when refused', () => {
    const cells = [
      cell(`${SOURCE}\n`, 3),
      cell('%%gpusight\nfor b in loader: pass', 4)
    ];
    const { fire } = setup(cells);
    expect(fire(VERIFY_CELL_EVENT).status).toBe(
      'Apply the change first (the changed cell is not in this notebook)'
    );
    expect(fire(APPLY_CELL_EVENT).applied).toBe(true);
    expect(fire(APPLY_CELL_EVENT).applied).toBe(false); // applied already: the text moved on
  });

  it('verifies: the changed cell run, then the watched cell again below, compared', async () => {
    const cells = [
      cell(`${SOURCE}\n`, 3),
      cell('%%gpusight --steps 20 --json before.json\nfor b in loader: pass', 4)
    ];
    const { notebook, fire } = setup(cells);
    fire(APPLY_CELL_EVENT);
    runs.length = 0;
    expect(fire(VERIFY_CELL_EVENT).status).toBe(
      'Verifying: the changed cell run, then the watched cell again below, compared with this report'
    );
    await settle();
    await settle();
    const verifying =
      '%%gpusight --steps 20 --compare-to 4 --finding load.input_bound\nfor b in loader: pass';
    expect(runs).toEqual([`${TARGET.patched}\n`, verifying]);
    expect(notebook.widgets).toHaveLength(3);
    expect(notebook.widgets[2].model.sharedModel.getSource()).toBe(verifying);
  });

  it('verifies only from a report under a %%gpusight cell that ran', () => {
    const cells = [cell(`${TARGET.patched}\n`, 3), cell('train()', 4)];
    const { fire } = setup(cells);
    expect(fire(VERIFY_CELL_EVENT).status).toBe(
      'Verify needs the %%gpusight cell that made this report, run'
    );
  });
});
