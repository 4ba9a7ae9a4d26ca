import { describe, expect, it, vi } from 'vitest';
import { verifySource } from './verify-cell';

vi.mock('@jupyterlab/notebook', () => ({ NotebookActions: {} }));

const BODY = 'for x, y in loader:\n    step(x, y)';

describe('verifySource', () => {
  it('keeps the watch options, compares with the watched run and names the finding', () => {
    expect(
      verifySource(
        `%%gpusight --steps 20 --json before.json --label "first try"\n${BODY}`,
        6,
        'load.input_bound'
      )
    ).toBe(
      `%%gpusight --steps 20 --compare-to 6 --finding load.input_bound\n${BODY}`
    );
    expect(
      verifySource(
        `%%gpusight --what-if --budget 60 --warmup 2 --profile-steps 0\n${BODY}`,
        9,
        null
      )
    ).toBe(`%%gpusight --warmup 2 --profile-steps 0 --compare-to 9\n${BODY}`);
  });

  it('drops an earlier comparison and a finding id that is not one', () => {
    expect(
      verifySource(
        `%%gpusight --compare-to 3 --finding x.y\n${BODY}`,
        7,
        'x; import os'
      )
    ).toBe(`%%gpusight --compare-to 7\n${BODY}`);
  });

  it('refuses a cell that is not a watched cell, or that never ran', () => {
    expect(verifySource(BODY, 4, null)).toBeNull();
    expect(verifySource('%gpusight\nx = 1', 4, null)).toBeNull();
    expect(verifySource(`%%gpusight\n${BODY}`, null, null)).toBeNull();
  });
});
