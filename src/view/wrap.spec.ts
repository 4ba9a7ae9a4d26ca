// @vitest-environment happy-dom
import { html, render } from 'lit';
import { describe, expect, it } from 'vitest';
import { breakable } from './wrap';

/** The text as rendered, with `|` where a line may break. */
function breaks(text: string): string {
  const host = document.createElement('div');
  render(html`${breakable(text)}`, host);
  return [...host.childNodes]
    .filter(n => n.nodeType !== Node.COMMENT_NODE)
    .map(n => (n.nodeName === 'WBR' ? '|' : (n.textContent ?? '')))
    .join('');
}

describe('breakable', () => {
  it('lets a dotted flag, an environment variable and a path wrap between their parts', () => {
    expect(breaks('torch.backends.cuda.matmul.allow_tf32')).toBe(
      'torch.|backends.|cuda.|matmul.|allow_|tf32'
    );
    expect(breaks('CUDA_VISIBLE_DEVICES')).toBe('CUDA_|VISIBLE_|DEVICES');
    expect(breaks('/work/main/train_mlp.py:42')).toBe(
      '/|work/|main/|train_|mlp.|py:42'
    );
    expect(breaks('DataLoader(pin_memory=True)')).toBe(
      'DataLoader(|pin_|memory=|True)'
    );
  });

  it('keeps numbers, sentences and plain words whole', () => {
    expect(breaks('2.29x faster, saves 56.4 %. Then')).toBe(
      '2.29x faster, saves 56.4 %. Then'
    );
    expect(breaks('Platform')).toBe('Platform');
    expect(breaks('')).toBe('');
  });
});
