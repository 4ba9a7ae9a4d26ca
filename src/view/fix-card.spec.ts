// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { GsFixCard } from './fix-card';
import {
  APPLY_CELL_EVENT,
  type CellActionDetail,
  INSERT_CELL_EVENT,
  type InsertCellDetail,
  SHOW_CELL_EVENT,
  VERIFY_CELL_EVENT
} from './fix-card';

const HOSTILE = '</script><img src=x onerror=alert(1)>';

async function card(props: Partial<GsFixCard>): Promise<GsFixCard> {
  const el = document.createElement('gs-fix-card');
  Object.assign(el, props);
  document.body.appendChild(el);
  await el.updateComplete;
  return el;
}

afterEach(() => {
  document.body.replaceChildren();
  vi.restoreAllMocks();
});

describe('<gs-fix-card>', () => {
  it('renders hostile strings as text, never as elements', async () => {
    const el = await card({
      fix: {
        text: HOSTILE,
        code: `x = "${HOSTILE}"\n${HOSTILE}`,
        language: 'python'
      },
      findingId: HOSTILE
    });
    const root = el.shadowRoot as ShadowRoot;
    expect(root.querySelector('img')).toBeNull();
    expect(root.querySelector('script')).toBeNull();
    expect(document.querySelector('img')).toBeNull();
    expect(root.querySelector('.jp-GpusightFixCard-text')?.textContent).toBe(
      HOSTILE
    );
    expect(root.querySelector('pre code')?.textContent).toBe(
      `x = "${HOSTILE}"\n${HOSTILE}`
    );
  });

  it('keeps hostile file names and source lines of a patch as text', async () => {
    // A file name and lines of the user's as the diff carries them: markup, a lit-like
    // binding, an attribute break-out, a bidirectional override.
    const name = `${HOSTILE}" onmouseover="alert(1)\u202e.py`;
    const line = `x = '<svg onload=alert(1)>' + \${alert(1)} + '<!-- -->'`;
    const patch =
      `--- a/${name}\n+++ b/${name}\n@@ -1,2 +1,2 @@\n ${line}\n` +
      `-${HOSTILE}\n+${HOSTILE} # </code></pre><script>alert(1)</script>\n`;
    const el = await card({
      fix: {
        text: 'Change it.',
        patch,
        patch_files: [{ path: name, sha256: '0'.repeat(64) }]
      },
      findingId: HOSTILE
    });
    const root = el.shadowRoot as ShadowRoot;
    for (const tag of ['img', 'svg', 'script']) {
      expect(root.querySelector(tag)).toBeNull();
      expect(document.querySelector(tag)).toBeNull();
    }
    expect(root.querySelector('[onmouseover]')).toBeNull();
    const pre = root.querySelector('pre.jp-GpusightFixCard-patch');
    expect(pre?.textContent).toBe(patch);
    // One span per diff line, and nothing else inside the code element.
    const code = pre?.querySelector('code');
    expect(
      [...(code?.children ?? [])].every(c =>
        c.classList.contains('jp-GpusightFixCard-patchLine')
      )
    ).toBe(true);
    expect(code?.children.length).toBe(patch.trimEnd().split('\n').length);
  });

  it("shows the patch of the user's lines as text, lines marked by kind", async () => {
    const patch =
      `--- a/${HOSTILE}.py\n+++ b/${HOSTILE}.py\n@@ -1,3 +1,3 @@\n` +
      ` loader = DataLoader(\n-    ds, batch_size=32,\n+    ds, batch_size=32, num_workers=8,\n )\n`;
    const el = await card({
      fix: { text: 'More workers.', code: 'x = 1\n', language: 'python', patch }
    });
    const root = el.shadowRoot as ShadowRoot;
    expect(root.querySelector('img')).toBeNull();
    const pre = root.querySelector('pre.jp-GpusightFixCard-patch');
    expect(pre?.textContent).toBe(patch);
    const kinds = [
      ...root.querySelectorAll('.jp-GpusightFixCard-patchLine')
    ].map(s => [...s.classList].find(c => c.startsWith('jp-mod-')));
    expect(kinds).toEqual([
      'jp-mod-file',
      'jp-mod-file',
      'jp-mod-hunk',
      'jp-mod-context',
      'jp-mod-removed',
      'jp-mod-added',
      'jp-mod-context'
    ]);
    // The snippet is still there, below, for Copy / Insert.
    expect(root.querySelector('pre.jp-GpusightFixCard-code')?.textContent).toBe(
      'x = 1\n'
    );
    expect(root.querySelector('.jp-GpusightFixCard-generic')).toBeNull();
  });

  it('labels a Python snippet without a patch as generic, not shell or text', async () => {
    const generic = await card({
      fix: {
        text: 'Pin memory.',
        code: 'loader = DataLoader(ds)\n',
        language: 'python'
      }
    });
    const label = generic.shadowRoot?.querySelector(
      '.jp-GpusightFixCard-generic'
    );
    expect(label?.textContent).toContain('Generic snippet');
    const shell = await card({
      fix: {
        text: 'TF32.',
        code: 'export NVIDIA_TF32_OVERRIDE=1\n',
        language: 'shell'
      }
    });
    expect(
      shell.shadowRoot?.querySelector('.jp-GpusightFixCard-generic')
    ).toBeNull();
  });

  it('offers code whose names the kernel lacks for Copy only, and names them', async () => {
    // Issue #36: an inserted `DataLoader(dataset, ...)` raised NameError in the user's kernel.
    const el = await card({
      insertable: true,
      fix: {
        text: 'Load batches in workers.',
        code: 'loader = DataLoader(dataset, num_workers=2)\n',
        language: 'python',
        unbound_names: ['dataset', 'DataLoader']
      }
    });
    const root = el.shadowRoot as ShadowRoot;
    expect(root.querySelector('.jp-GpusightFixCard-insert')).toBeNull();
    expect(root.querySelector('.jp-GpusightFixCard-copy')).not.toBeNull();
    const note = root.querySelector('.jp-GpusightFixCard-copyOnly');
    expect(note?.textContent?.replace(/\s+/g, ' ')).toContain(
      'Copy only: this code reads `dataset`, `DataLoader`, which your kernel does not define'
    );
    expect(root.querySelector('.jp-GpusightFixCard-generic')).toBeNull();
    // Every name bound: Insert is offered again.
    el.fix = { ...el.fix!, unbound_names: undefined };
    await el.updateComplete;
    expect(root.querySelector('.jp-GpusightFixCard-insert')).not.toBeNull();
    expect(root.querySelector('.jp-GpusightFixCard-copyOnly')).toBeNull();
  });

  it('offers Show / Apply for a change to a notebook cell, answered by the host', async () => {
    const cell = {
      source: `x = "${HOSTILE}"\nloader = DataLoader(ds)`,
      patched: `x = "${HOSTILE}"\nloader = DataLoader(ds, num_workers=2)`,
      line: 2,
      execution_count: 4,
      label: `cell [4] ${HOSTILE}`
    };
    const fix = {
      text: 'More workers.',
      code: 'loader = DataLoader(ds, num_workers=2)\n',
      language: 'python' as const,
      patch: `--- a/cell [4]\n+++ b/cell [4]\n@@ -1,2 +1,2 @@\n x = 1\n-a\n+b\n`,
      cell
    };
    // Without a host that handles cells (an exported page): no buttons.
    const bare = await card({ fix });
    expect(
      bare.shadowRoot?.querySelector('.jp-GpusightFixCard-applyCell')
    ).toBeNull();
    bare.remove();

    const el = await card({
      fix,
      insertable: true,
      findingId: 'load.input_bound'
    });
    const root = el.shadowRoot as ShadowRoot;
    expect(root.querySelector('img')).toBeNull();
    expect(
      root.querySelector('.jp-GpusightFixCard-patchTitle')?.textContent?.trim()
    ).toBe(`Change to cell [4] ${HOSTILE}`);
    const seen: [string, CellActionDetail][] = [];
    const answer = (e: Event) => {
      const ev = e as CustomEvent<CellActionDetail>;
      seen.push([ev.type, ev.detail]);
      ev.detail.status = `${ev.type} done`;
      ev.preventDefault();
    };
    document.addEventListener(SHOW_CELL_EVENT, answer);
    document.addEventListener(APPLY_CELL_EVENT, answer);
    const status = () =>
      root.querySelector('.jp-GpusightFixCard-cellStatus')?.textContent;
    (
      root.querySelector('.jp-GpusightFixCard-showCell') as HTMLButtonElement
    ).click();
    await el.updateComplete;
    expect(status()).toBe('gs-show-cell done');
    (
      root.querySelector('.jp-GpusightFixCard-applyCell') as HTMLButtonElement
    ).click();
    await el.updateComplete;
    expect(status()).toBe('gs-apply-cell done');
    // Not applied (the host did not say so): no Verify yet.
    const verify = () =>
      root.querySelector('.jp-GpusightFixCard-verifyCell') as HTMLButtonElement;
    expect(verify()).toBeNull();
    const applied = (e: Event) => {
      (e as CustomEvent<CellActionDetail>).detail.applied = true;
    };
    document.addEventListener(APPLY_CELL_EVENT, applied);
    document.addEventListener(VERIFY_CELL_EVENT, answer);
    (
      root.querySelector('.jp-GpusightFixCard-applyCell') as HTMLButtonElement
    ).click();
    await el.updateComplete;
    verify().click();
    await el.updateComplete;
    expect(status()).toBe('gs-verify-cell done');
    // Issue #36: the status stayed "Verifying..." after the runs ended. The host hands over
    // when they end; the card then says how they ended.
    let finish: (s: string) => void = () => undefined;
    const running = (e: Event) => {
      const ev = e as CustomEvent<CellActionDetail>;
      ev.detail.status = 'Verifying: the watched cell again below';
      ev.detail.settled = new Promise<string>(resolve => (finish = resolve));
      ev.preventDefault();
    };
    document.removeEventListener(VERIFY_CELL_EVENT, answer);
    document.addEventListener(VERIFY_CELL_EVENT, running);
    verify().click();
    await el.updateComplete;
    expect(status()).toBe('Verifying: the watched cell again below');
    finish('Verified: the comparison is in the cell below the report');
    await new Promise(r => setTimeout(r, 0));
    await el.updateComplete;
    expect(status()).toBe(
      'Verified: the comparison is in the cell below the report'
    );
    document.removeEventListener(VERIFY_CELL_EVENT, running);
    document.addEventListener(VERIFY_CELL_EVENT, answer);
    expect(seen.map(([t, d]) => [t, d.cell, d.findingId])).toEqual([
      [SHOW_CELL_EVENT, cell, 'load.input_bound'],
      [APPLY_CELL_EVENT, cell, 'load.input_bound'],
      [APPLY_CELL_EVENT, cell, 'load.input_bound'],
      [VERIFY_CELL_EVENT, cell, 'load.input_bound']
    ]);
    document.removeEventListener(SHOW_CELL_EVENT, answer);
    document.removeEventListener(APPLY_CELL_EVENT, answer);
    document.removeEventListener(APPLY_CELL_EVENT, applied);
    document.removeEventListener(VERIFY_CELL_EVENT, answer);
    // Nobody answers (a report outside a notebook): the card says what to do instead.
    (
      root.querySelector('.jp-GpusightFixCard-applyCell') as HTMLButtonElement
    ).click();
    await el.updateComplete;
    expect(status()).toBe('No notebook here: copy the change by hand');
  });

  it('highlights the snippet with spans that add up to the code', async () => {
    const code = 'loader = DataLoader(ds, pin_memory=True)  # overlap copies\n';
    const el = await card({
      fix: { text: 'Pin memory.', code, language: 'python' }
    });
    const root = el.shadowRoot as ShadowRoot;
    expect(root.querySelector('pre code')?.textContent).toBe(code);
    const kinds = [...root.querySelectorAll('.jp-GpusightFixCard-tok')].map(s =>
      [...s.classList].find(c => c.startsWith('jp-mod-'))
    );
    expect(kinds).toContain('jp-mod-keyword');
    expect(kinds).toContain('jp-mod-comment');
  });

  it('copies the snippet with the clipboard API', async () => {
    const writeText = vi.fn(async (_text: string) => undefined);
    vi.stubGlobal('navigator', { ...navigator, clipboard: { writeText } });
    const code = 'torch.backends.cuda.matmul.allow_tf32 = True';
    const el = await card({ fix: { text: 'TF32.', code, language: 'python' } });
    const root = el.shadowRoot as ShadowRoot;
    root.querySelector<HTMLButtonElement>('.jp-GpusightFixCard-copy')?.click();
    await vi.waitFor(() => expect(writeText).toHaveBeenCalledWith(code));
    await el.updateComplete;
    await vi.waitFor(() =>
      expect(
        root.querySelector('.jp-GpusightFixCard-status')?.textContent
      ).toBe('Copied')
    );
    vi.unstubAllGlobals();
  });

  it('falls back to execCommand when the clipboard API is refused', async () => {
    vi.stubGlobal('navigator', {
      ...navigator,
      clipboard: { writeText: () => Promise.reject(new Error('denied')) }
    });
    const copied: string[] = [];
    const exec = vi.fn((cmd: string) => {
      const area = document.querySelector('textarea');
      copied.push(`${cmd}:${area?.value}`);
      return true;
    });
    Object.defineProperty(document, 'execCommand', {
      value: exec,
      configurable: true
    });
    const el = await card({
      fix: { text: 'x', code: 'a = 1', language: 'python' }
    });
    el.shadowRoot
      ?.querySelector<HTMLButtonElement>('.jp-GpusightFixCard-copy')
      ?.click();
    await vi.waitFor(() => expect(copied).toEqual(['copy:a = 1']));
    // The helper textarea is gone again.
    expect(document.querySelector('textarea')).toBeNull();
    vi.unstubAllGlobals();
  });

  it('asks its host to insert the code below, in a bubbling, composed event', async () => {
    const code = 'model = model.to("cuda")';
    const wrapper = document.createElement('div');
    document.body.appendChild(wrapper);
    const el = document.createElement('gs-fix-card');
    el.fix = { text: 'Move the model.', code, language: 'python' };
    el.findingId = 'code.cpu_model';
    el.insertable = true;
    wrapper.appendChild(el);
    await el.updateComplete;
    const seen: InsertCellDetail[] = [];
    document.body.addEventListener(INSERT_CELL_EVENT, e => {
      seen.push((e as CustomEvent<InsertCellDetail>).detail);
      e.preventDefault();
    });
    el.shadowRoot
      ?.querySelector<HTMLButtonElement>('.jp-GpusightFixCard-insert')
      ?.click();
    expect(seen).toEqual([
      { code, language: 'python', findingId: 'code.cpu_model' }
    ]);
    await el.updateComplete;
    expect(
      el.shadowRoot?.querySelector('.jp-GpusightFixCard-status')?.textContent
    ).toContain('Inserted below');
  });

  it('offers Insert only for Python in a host that handles it', async () => {
    const shell = await card({
      fix: { text: 'x', code: 'export A=1', language: 'shell' },
      insertable: true
    });
    expect(
      shell.shadowRoot?.querySelector('.jp-GpusightFixCard-insert')
    ).toBeNull();
    const noHost = await card({
      fix: { text: 'x', code: 'a = 1', language: 'python' }
    });
    expect(
      noHost.shadowRoot?.querySelector('.jp-GpusightFixCard-insert')
    ).toBeNull();
    expect(
      noHost.shadowRoot?.querySelector('.jp-GpusightFixCard-copy')
    ).not.toBeNull();
  });
});
