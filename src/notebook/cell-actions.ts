/**
 * "Show the cell" and "Apply to that cell" for fix cards whose change is to a notebook cell
 * (the report's `fix.cell`): a `<gs-report>` anywhere in the lab fires `gs-show-cell` /
 * `gs-apply-cell`, and one listener on the shell finds the cell (src/notebook/cell-target.ts) in
 * the notebook that shows the report, scrolls to it and selects the changed call, or replaces the
 * cell's text by the patched text in one edit of its shared model (never run; one undo in the
 * cell's editor takes it back). A cell whose text changed since the watch is never edited.
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import type { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import type { CellPatch } from '../report';
import {
  APPLY_CELL_EVENT,
  SHOW_CELL_EVENT,
  VERIFY_CELL_EVENT,
  type CellActionDetail
} from '../view/fix-card';
import {
  cellName,
  type CellText,
  findTargetCell,
  minimalEdit,
  refusal,
  targetLines
} from './cell-target';
import { onceOnShell, panelOf } from './shell-events';
import { verifyCell } from './verify-cell';

type Cell = NotebookPanel['content']['widgets'][number];

/** The class a shown cell wears for a moment (style/base.css), beside the editor's selection. */
export const SHOWN_CELL_CLASS = 'jp-GpusightShownCell';
const SHOWN_MS = 2500;

function texts(panel: NotebookPanel): CellText[] {
  return panel.content.widgets.map(cell => {
    const model = cell.model as { executionCount?: number | null };
    return {
      source: cell.model.sharedModel.getSource(),
      executionCount:
        cell.model.type === 'code' ? (model.executionCount ?? null) : null
    };
  });
}

/** Scroll to the cell, make it the active one and select the call's lines in its editor. */
async function reveal(
  panel: NotebookPanel,
  cell: Cell,
  target: CellPatch
): Promise<void> {
  const notebook = panel.content;
  notebook.activeCellIndex = notebook.widgets.indexOf(cell);
  await notebook.scrollToCell(cell, 'center');
  await cell.ready;
  const editor = cell.editor;
  if (editor) {
    const { from, to } = targetLines(target);
    const last = Math.min(to, editor.lineCount - 1);
    const end = editor.getLine(last)?.length ?? 0;
    editor.setSelection({
      start: { line: from, column: 0 },
      end: { line: last, column: end }
    });
    editor.revealPosition({ line: from, column: 0 });
  }
  cell.node.classList.add(SHOWN_CELL_CLASS);
  window.setTimeout(
    () => cell.node.classList.remove(SHOWN_CELL_CLASS),
    SHOWN_MS
  );
}

/** "Show the cell": the status to show on the card. */
export function showCell(
  tracker: INotebookTracker,
  origin: Node | null,
  target: CellPatch
): string {
  const panel = panelOf(tracker, origin);
  if (!panel) {
    return 'No notebook open to show the cell in';
  }
  const match = findTargetCell(texts(panel), target);
  if (match.kind === 'missing') {
    return `${cellName(target)} is not in this notebook`;
  }
  void reveal(panel, panel.content.widgets[match.index], target);
  return match.kind === 'stale'
    ? `Shown: ${cellName(target)} has changed since the watch ran`
    : `Shown: ${cellName(target)}, line ${target.line}`;
}

/** "Apply to that cell": the patched text in place of the cell's, unrun; the status to show. */
export function applyToCell(
  tracker: INotebookTracker,
  origin: Node | null,
  target: CellPatch,
  done?: () => void
): string {
  const panel = panelOf(tracker, origin);
  if (!panel) {
    return 'No notebook open to apply the change in';
  }
  const match = findTargetCell(texts(panel), target);
  const why = refusal(match, target);
  if (why !== null || match.kind !== 'found') {
    return why ?? 'Not applied';
  }
  const cell = panel.content.widgets[match.index];
  const shared = cell.model.sharedModel;
  // The current text equals the one that ran up to its trailing newlines, which the edit
  // (between the two texts the report holds) never reaches.
  const edit = minimalEdit(target.source, target.patched);
  shared.updateSource(edit.start, edit.end, edit.text);
  done?.();
  void reveal(panel, cell, target);
  return `Applied to ${cellName(target)} (not run; undo in the cell takes it back)`;
}

/** Handle `gs-show-cell`, `gs-apply-cell` and `gs-verify-cell` from every report in the shell
 * (once). */
export function listenForCellActions(
  app: JupyterFrontEnd,
  tracker: INotebookTracker
): void {
  onceOnShell(app, SHOW_CELL_EVENT, shell => {
    const on = (
      name: string,
      act: (
        tracker: INotebookTracker,
        origin: Node | null,
        cell: CellPatch,
        detail: CellActionDetail
      ) => string
    ) =>
      shell.addEventListener(name, (event: Event) => {
        const detail = (event as CustomEvent<CellActionDetail>).detail;
        const cell = detail?.cell;
        if (
          !cell ||
          typeof cell.source !== 'string' ||
          typeof cell.patched !== 'string'
        ) {
          return;
        }
        const origin = event.target instanceof Node ? event.target : null;
        detail.status = act(tracker, origin, cell, detail);
        event.preventDefault();
      });
    on(SHOW_CELL_EVENT, (t, o, c) => showCell(t, o, c));
    on(APPLY_CELL_EVENT, (t, o, c, d) =>
      applyToCell(t, o, c, () => (d.applied = true))
    );
    on(VERIFY_CELL_EVENT, (t, o, c, d) => {
      const got = verifyCell(t, o, c, d.findingId);
      d.settled = got.settled;
      return got.status;
    });
  });
}
