/**
 * Which cell of a notebook a fix's `cell` patch is for, and the edit that applies it. Pure logic
 * over cell texts: src/notebook/cell-actions.ts does the notebook's part.
 *
 * The cell is found by its text as the kernel ran it (the report's `cell.source`; the kernel's
 * history cuts trailing newlines, so they never count). Where several cells have that text, the
 * one with the run's execution count wins. A cell with that execution count whose text is no
 * longer the one that ran is stale: it can be shown, never patched.
 */
import type { CellPatch } from '../report';

/** What is known of a notebook cell: its text and the execution count of its last run. */
export interface CellText {
  source: string;
  executionCount: number | null;
}

export type CellMatch =
  | { kind: 'found'; index: number }
  | { kind: 'stale'; index: number }
  | { kind: 'missing' };

/** The text without the newlines at its end (the kernel's history keeps none). */
export function trimEnd(text: string): string {
  return text.replace(/[\r\n]+$/, '');
}

export function findTargetCell(
  cells: readonly CellText[],
  target: CellPatch
): CellMatch {
  const wanted = trimEnd(target.source);
  const count = target.execution_count ?? null;
  const same = cells
    .map((cell, index) => ({ cell, index }))
    .filter(({ cell }) => trimEnd(cell.source) === wanted);
  if (same.length) {
    const exact = same.find(({ cell }) => cell.executionCount === count);
    return { kind: 'found', index: (exact ?? same[0]).index };
  }
  if (count !== null) {
    const index = cells.findIndex(cell => cell.executionCount === count);
    if (index >= 0) {
      return { kind: 'stale', index };
    }
  }
  const edited = editedCell(cells, wanted, target.line);
  return edited === null
    ? { kind: 'missing' }
    : { kind: 'stale', index: edited };
}

/**
 * The one cell that still holds the changed call's line, where the cell was edited and run again
 * since the watch (its text and execution count both differ): null where none or several do.
 */
function editedCell(
  cells: readonly CellText[],
  wanted: string,
  line: number
): number | null {
  const call = (wanted.split('\n')[line - 1] ?? '').trim();
  if (call.length < 8) {
    return null; // too short to tell one cell from another
  }
  const holding = cells
    .map((cell, index) => ({ cell, index }))
    .filter(({ cell }) => cell.source.split('\n').some(l => l.trim() === call));
  return holding.length === 1 ? holding[0].index : null;
}

/** One replacement: `text` in place of characters `start` to `end` (end exclusive). */
export interface TextEdit {
  start: number;
  end: number;
  text: string;
}

/**
 * The smallest single edit that turns `before` into `after` (common head and tail kept), so
 * that applying it moves no other text and undoes in one step.
 */
export function minimalEdit(before: string, after: string): TextEdit {
  let head = 0;
  const most = Math.min(before.length, after.length);
  while (head < most && before[head] === after[head]) {
    head++;
  }
  let tail = 0;
  while (
    tail < most - head &&
    before[before.length - 1 - tail] === after[after.length - 1 - tail]
  ) {
    tail++;
  }
  return {
    start: head,
    end: before.length - tail,
    text: after.slice(head, after.length - tail)
  };
}

/** The lines (0-based, inclusive) to highlight in the cell: the changed call. */
export function targetLines(target: CellPatch): { from: number; to: number } {
  const from = Math.max(0, target.line - 1);
  return { from, to: Math.max(from, (target.end_line ?? target.line) - 1) };
}

/** How a cell is named to the user. */
export function cellName(target: CellPatch): string {
  return target.label ?? 'the cell';
}

/** Why a match cannot be patched, in words; null when it can. */
export function refusal(match: CellMatch, target: CellPatch): string | null {
  const name = cellName(target);
  if (match.kind === 'stale') {
    return (
      `Not applied: ${name} has changed since the watch ran. ` +
      'Run it and the watch again for a fix of its current text.'
    );
  }
  if (match.kind === 'missing') {
    return `Not applied: ${name} is not in this notebook (no cell has the text that ran).`;
  }
  return null;
}
