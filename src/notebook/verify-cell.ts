/**
 * "Verify" on a fix card, after "Apply to that cell": the changed cell is run, then a copy of the
 * watched cell (the one whose output shows the report) goes below it as
 * `%%gpusight --compare-to N --finding ID` and is run: the kernel watches the training again and
 * prints the items per second before and after, the gain the report predicted for that fix, and
 * `gpusight diff`'s table (python_pkg/gpusight/jupyter/cell_compare.py). Both runs are the
 * user's click; nothing runs by itself.
 */
import { type INotebookTracker, NotebookActions } from '@jupyterlab/notebook';
import type { CellPatch } from '../report';
import { findTargetCell } from './cell-target';
import { panelOf } from './shell-events';

// The watch's options the comparison keeps (the run measured as before); the rest (--what-if,
// --json, a label, an earlier comparison) are the first run's own.
const KEPT = new Set(['--steps', '--warmup', '--profile-steps']);

/**
 * The verifying cell's text: the watched cell's body under a `%%gpusight` line with its step
 * options, `--compare-to` its run and `--finding`; null where the report's cell is not a
 * `%%gpusight` cell that ran (a report from `diagnose()`, a cell never run).
 */
export function verifySource(
  watched: string,
  executionCount: number | null,
  findingId: string | null
): string | null {
  const [first, ...body] = watched.split('\n');
  const words = first.trim().split(/\s+/);
  if (words[0] !== '%%gpusight' || executionCount === null) {
    return null;
  }
  const kept: string[] = [];
  for (let i = 1; i < words.length; i++) {
    if (KEPT.has(words[i]) && /^\d+$/.test(words[i + 1] ?? '')) {
      kept.push(words[i], words[i + 1]);
      i++;
    }
  }
  kept.push('--compare-to', String(executionCount));
  if (findingId && /^[a-z_.]+$/.test(findingId)) {
    kept.push('--finding', findingId);
  }
  return [`%%gpusight ${kept.join(' ')}`, ...body].join('\n');
}

type Panel = NonNullable<ReturnType<typeof panelOf>>;

async function runAt(panel: Panel, index: number): Promise<boolean> {
  panel.content.activeCellIndex = index;
  return NotebookActions.run(panel.content, panel.sessionContext);
}

/** The two runs; what the card says once they end. */
async function verify(
  panel: Panel,
  applied: number | null,
  watched: number,
  text: string
): Promise<string> {
  if (applied !== null && !(await runAt(panel, applied))) {
    return 'Verify stopped: the changed cell raised an error (its output says why)';
  }
  const notebook = panel.content;
  notebook.activeCellIndex = watched;
  NotebookActions.insertBelow(notebook);
  const cell = notebook.activeCell;
  if (!cell || cell.model.type !== 'code') {
    return 'Verify stopped: no code cell could be added below the report';
  }
  cell.model.sharedModel.setSource(text);
  return (await runAt(panel, notebook.activeCellIndex))
    ? 'Verified: the comparison is in the cell below the report'
    : 'The verifying cell raised an error: its output says why';
}

/** What "Verify" says now, and once its runs end (none where it did not start). */
export interface VerifyStatus {
  status: string;
  settled?: Promise<string>;
}

/** "Verify": start the two runs; the status to show on the card. */
export function verifyCell(
  tracker: INotebookTracker,
  origin: Node | null,
  target: CellPatch,
  findingId: string | null
): VerifyStatus {
  const panel = panelOf(tracker, origin);
  if (!panel || !origin) {
    return { status: 'No notebook open to verify in' };
  }
  const cells = panel.content.widgets;
  const watched = cells.findIndex(cell => cell.node.contains(origin));
  if (watched < 0) {
    return { status: 'Verify works from the report under its %%gpusight cell' };
  }
  const model = cells[watched].model as { executionCount?: number | null };
  const text = verifySource(
    cells[watched].model.sharedModel.getSource(),
    model.executionCount ?? null,
    findingId
  );
  if (text === null) {
    return {
      status: 'Verify needs the %%gpusight cell that made this report, run'
    };
  }
  const found = findTargetCell(
    cells.map(cell => ({
      source: cell.model.sharedModel.getSource(),
      executionCount: null
    })),
    { ...target, source: target.patched, execution_count: undefined }
  );
  if (found.kind !== 'found') {
    return {
      status:
        'Apply the change first (the changed cell is not in this notebook)'
    };
  }
  // The change in the watched cell itself (autocast around its forward): the copy has it.
  const applied = found.index === watched ? null : found.index;
  const settled = verify(panel, applied, watched, text);
  return {
    status:
      applied === null
        ? 'Verifying: the watched cell again below, compared with this report'
        : 'Verifying: the changed cell run, then the watched cell again below, compared with this report',
    settled
  };
}
