import { describe, expect, it } from 'vitest';
import type { CellPatch } from '../report';
import {
  findTargetCell,
  minimalEdit,
  refusal,
  targetLines,
  trimEnd
} from './cell-target';

const SOURCE =
  'import torch\nloader = DataLoader(\n    ds,\n    batch_size=32,\n)\nx = 1';
const TARGET: CellPatch = {
  source: SOURCE,
  patched: SOURCE.replace('batch_size=32,', 'batch_size=32, num_workers=2,'),
  line: 2,
  end_line: 5,
  execution_count: 7,
  label: 'cell [7]'
};

describe('findTargetCell', () => {
  it('finds the cell by the text that ran, trailing newlines aside', () => {
    const cells = [
      { source: '%load_ext gpusight', executionCount: 1 },
      { source: `${SOURCE}\n\n`, executionCount: 7 },
      { source: 'train()', executionCount: 8 }
    ];
    expect(findTargetCell(cells, TARGET)).toEqual({ kind: 'found', index: 1 });
  });

  it('prefers, among cells of the same text, the one of that run', () => {
    const cells = [
      { source: SOURCE, executionCount: 3 },
      { source: SOURCE, executionCount: 7 },
      { source: SOURCE, executionCount: null }
    ];
    expect(findTargetCell(cells, TARGET)).toEqual({ kind: 'found', index: 1 });
    // Run in another kernel since (other counts): the first of that text.
    cells[1].executionCount = 12;
    expect(findTargetCell(cells, TARGET)).toEqual({ kind: 'found', index: 0 });
  });

  it("calls the run's cell stale once its text changed, and missing when there is none", () => {
    const edited = [
      { source: SOURCE.replace('32', '64'), executionCount: 7 },
      { source: 'other', executionCount: 8 }
    ];
    const stale = findTargetCell(edited, TARGET);
    expect(stale).toEqual({ kind: 'stale', index: 0 });
    expect(refusal(stale, TARGET)).toMatch(
      /^Not applied: cell \[7\] has changed since the watch ran/
    );
    const gone = findTargetCell(
      [{ source: 'other', executionCount: 8 }],
      TARGET
    );
    expect(gone).toEqual({ kind: 'missing' });
    expect(refusal(gone, TARGET)).toMatch(/cell \[7\] is not in this notebook/);
    expect(refusal({ kind: 'found', index: 0 }, TARGET)).toBeNull();
    // Issue #36: a cell edited and run again (another count) was "not in this notebook". The
    // one cell that still holds the changed call's line is the run's cell, changed.
    const rerun = [
      { source: 'other', executionCount: 8 },
      { source: SOURCE.replace('32', '64'), executionCount: 9 }
    ];
    expect(findTargetCell(rerun, TARGET)).toEqual({ kind: 'stale', index: 1 });
    const { execution_count: _, ...uncounted } = TARGET;
    expect(findTargetCell(edited, uncounted)).toEqual({
      kind: 'stale',
      index: 0
    });
    // Two cells hold that line: which one changed is not known.
    const twice = [
      ...rerun,
      { source: SOURCE.replace('32', '16'), executionCount: 10 }
    ];
    expect(findTargetCell(twice, TARGET)).toEqual({ kind: 'missing' });
  });
});

describe('minimalEdit', () => {
  it('replaces only what differs, and applying it gives the patched text', () => {
    const edit = minimalEdit(TARGET.source, TARGET.patched);
    expect(edit.text).toBe(' num_workers=2,');
    expect(TARGET.source.slice(edit.start, edit.end)).toBe('');
    const applied =
      TARGET.source.slice(0, edit.start) +
      edit.text +
      TARGET.source.slice(edit.end);
    expect(applied).toBe(TARGET.patched);
    // Also onto the cell's text with the newline the history cut: it stays.
    const current = `${SOURCE}\n`;
    expect(
      current.slice(0, edit.start) + edit.text + current.slice(edit.end)
    ).toBe(`${TARGET.patched}\n`);
  });

  it('handles a replacement, a deletion and no change', () => {
    for (const [a, b] of [
      ['num_workers=0)', 'num_workers=8)'],
      ['f(a, b)', 'f(a)'],
      ['aaa', 'aaaa'],
      ['same', 'same']
    ]) {
      const e = minimalEdit(a, b);
      expect(a.slice(0, e.start) + e.text + a.slice(e.end)).toBe(b);
    }
    expect(minimalEdit('num_workers=0)', 'num_workers=8)')).toEqual({
      start: 12,
      end: 13,
      text: '8'
    });
  });
});

describe('targetLines', () => {
  it("gives the call's lines, 0-based, the end never before the start", () => {
    expect(targetLines(TARGET)).toEqual({ from: 1, to: 4 });
    expect(targetLines({ ...TARGET, end_line: undefined })).toEqual({
      from: 1,
      to: 1
    });
  });

  it('trims only newlines at the end', () => {
    expect(trimEnd('x = 1  \n\r\n')).toBe('x = 1  ');
  });
});
