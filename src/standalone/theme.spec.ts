import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DARK_THEME, LIGHT_THEME, themeCss } from './theme';

const src = join(__dirname, '..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap(name => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      return sources(path);
    }
    return name.endsWith('.ts') && !name.endsWith('.spec.ts') ? [path] : [];
  });
}

/** Every --jp-* variable the standalone bundle's elements and charts read. */
function usedVariables(): string[] {
  const used = new Set<string>();
  for (const dir of ['view', 'charts', 'standalone']) {
    for (const file of sources(join(src, dir))) {
      for (const m of readFileSync(file, 'utf-8').matchAll(
        /var\((--jp-[a-z0-9-]+)/g
      )) {
        used.add(m[1]);
      }
    }
  }
  return [...used].sort();
}

describe('default theme', () => {
  it('defines every variable the elements use, in light and dark', () => {
    const used = usedVariables();
    expect(used.length).toBeGreaterThan(20);
    expect(used.filter(v => !(v in LIGHT_THEME))).toEqual([]);
    expect(used.filter(v => !(v in DARK_THEME))).toEqual([]);
  });

  it('is light by default and dark on request, with nothing fetched', () => {
    const css = themeCss();
    expect(css).toContain('--jp-layout-color1: #fff;');
    expect(css).toMatch(
      /@media \(prefers-color-scheme: dark\) \{[^@]*--jp-layout-color1: #212121;/
    );
    expect(css).not.toMatch(/url\(|@import|@font-face/);
  });
});
