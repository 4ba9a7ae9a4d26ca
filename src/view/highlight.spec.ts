import { describe, expect, it } from 'vitest';
import { MAX_HIGHLIGHT_CHARS, tokenize } from './highlight';

const join = (code: string, lang: string) =>
  tokenize(code, lang)
    .map(t => t.text)
    .join('');

describe('tokenize', () => {
  it('gives back the code exactly, whatever it holds', () => {
    const samples = [
      'loader = DataLoader(ds, batch_size=64, num_workers=8, pin_memory=True)  # pin\n',
      "x = f\"{a!r}\" + '''multi\nline''' + 0x1F + 1e-3j\n@torch.no_grad()\ndef run(): pass",
      '</script><img src=x onerror=alert(1)>',
      'unterminated "string',
      ''
    ];
    for (const s of samples) {
      expect(join(s, 'python')).toBe(s);
      expect(join(s, 'shell')).toBe(s);
      expect(join(s, 'text')).toBe(s);
    }
  });

  it('classifies Python keywords, strings, numbers, comments and names', () => {
    const toks = tokenize(
      'def step(x):\n    return x * 2  # twice\n',
      'python'
    ).filter(t => t.kind !== 'plain');
    expect(toks.map(t => [t.kind, t.text])).toEqual([
      ['keyword', 'def'],
      ['def', 'step'],
      ['keyword', 'return'],
      ['operator', '*'],
      ['number', '2'],
      ['comment', '# twice']
    ]);
    expect(
      tokenize("s = 'it''s'", 'python').filter(t => t.kind === 'string')
    ).toHaveLength(2);
  });

  it('classifies shell variables, flags and keywords', () => {
    const kinds = tokenize(
      'export CUDA_VISIBLE_DEVICES=$GPU; nvidia-smi -q --id 0',
      'shell'
    )
      .filter(t => t.kind !== 'plain')
      .map(t => `${t.kind}:${t.text}`);
    expect(kinds).toEqual([
      'keyword:export',
      'operator:=',
      'variable:$GPU',
      'operator:;',
      'flag:-q',
      'flag:--id',
      'number:0'
    ]);
  });

  it('shows a snippet over the limit as one plain piece, unchanged', () => {
    const line = 'x = torch.randn(64, 3)  # a comment\n';
    const big = line.repeat(Math.ceil((1024 * 1024) / line.length));
    const tokens = tokenize(big, 'python');
    expect(tokens).toEqual([{ kind: 'plain', text: big }]);
    const small = line.repeat(Math.floor(MAX_HIGHLIGHT_CHARS / line.length));
    expect(tokenize(small, 'python').length).toBeGreaterThan(100);
  });
});
