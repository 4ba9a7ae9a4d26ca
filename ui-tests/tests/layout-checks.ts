import type { IJupyterLabPageFixture } from '@jupyterlab/galata';
import type { Locator } from '@playwright/test';

/** What the layout tests measure on a drawn report: overflow, scrollbars, broken words. */

/**
 * Every element of the report (through its shadow roots) that reaches past the box of the card
 * holding it (the nearest <section>, <details> or the report itself), by more than 1 px.
 * Screen-reader-only text is off screen on purpose; inside a horizontal scroller (a code block)
 * only the scroller itself must fit.
 */
export async function overflowing(report: Locator): Promise<string[]> {
  return report.evaluate((root: Element) => {
    const out: string[] = [];
    const cardOf = (el: Element): Element | null => {
      let node: Node | null = el;
      while (node) {
        const parent: Node | null =
          (node as Element).assignedSlot ??
          node.parentNode ??
          (node as ShadowRoot).host ??
          null;
        const p: Node | null =
          parent instanceof ShadowRoot ? parent.host : parent;
        if (
          p instanceof Element &&
          (p.matches('section, details, article.jp-GpusightReport') ||
            p === root)
        ) {
          return p;
        }
        node = p;
      }
      return null;
    };
    const visit = (node: Element | ShadowRoot, scrolled: boolean): void => {
      for (const el of node.children) {
        if (el.matches('.jp-Gpusight-srOnly, title, desc, style')) {
          continue;
        }
        const r = el.getBoundingClientRect();
        const card = cardOf(el);
        if (!scrolled && card && r.width > 0 && r.height > 0) {
          const c = card.getBoundingClientRect();
          if (r.left < c.left - 1 || r.right > c.right + 1) {
            const name =
              el.tagName.toLowerCase() +
              (el.getAttribute('class') ? `.${el.getAttribute('class')}` : '');
            out.push(
              `${name} [${Math.round(r.left)}, ${Math.round(r.right)}] outside ` +
                `${card.tagName.toLowerCase()} [${Math.round(c.left)}, ${Math.round(c.right)}]: ` +
                (el.textContent ?? '').trim().slice(0, 60)
            );
          }
        }
        const style = getComputedStyle(el);
        const scroller = /auto|scroll/.test(style.overflowX);
        visit(el, scrolled || scroller);
        if (el.shadowRoot) {
          visit(el.shadowRoot, scrolled || scroller);
        }
      }
    };
    visit(root.shadowRoot ?? root, false);
    return out;
  });
}

/** Opens every disclosure of the report, so what they hold is measured too. */
export async function openDetails(report: Locator): Promise<void> {
  await report.evaluate((root: Element) => {
    const visit = (node: Element | ShadowRoot): void => {
      for (const el of node.querySelectorAll('*')) {
        if (el instanceof HTMLDetailsElement) {
          el.open = true;
        }
        if (el.shadowRoot) {
          visit(el.shadowRoot);
        }
      }
    };
    visit(root.shadowRoot ?? root);
  });
  // Charts redraw at their new widths on the next frame.
  await report.page().waitForTimeout(300);
}

export async function themes(
  page: IJupyterLabPageFixture,
  each: (theme: 'light' | 'dark') => Promise<void>
): Promise<void> {
  for (const theme of ['light', 'dark'] as const) {
    if (theme === 'light') {
      await page.theme.setLightTheme();
    } else {
      await page.theme.setDarkTheme();
    }
    await each(theme);
  }
}

/**
 * Each scroller around the report (its output area, the notebook, the sidebar) that scrolls
 * sideways: the report made it wider than its place. Inside the report, a code block may scroll.
 */
export async function sidewaysScrollers(report: Locator): Promise<string[]> {
  return report.evaluate((root: Element) => {
    const out: string[] = [];
    // The outermost elements inside the report that reach past the scroller's right edge.
    const widest = (scroller: Element): string[] => {
      const edge = scroller.getBoundingClientRect().right + 1;
      const found: string[] = [];
      const visit = (node: Element | ShadowRoot): void => {
        for (const el of node.children) {
          const r = el.getBoundingClientRect();
          if (r.right > edge && r.width > 0) {
            found.push(
              `${el.tagName.toLowerCase()}.${el.getAttribute('class') ?? ''} ` +
                `to ${Math.round(r.right)} in ${el.parentElement?.tagName.toLowerCase()}.${el.parentElement?.getAttribute('class') ?? ''} ${el.parentElement ? getComputedStyle(el.parentElement).overflowX : ''} (${(el.textContent ?? '').trim().slice(0, 40)})`
            );
          } else {
            visit(el);
            if (el.shadowRoot) {
              visit(el.shadowRoot);
            }
          }
        }
      };
      visit(root.shadowRoot ?? root);
      return found.slice(0, 4);
    };
    let node: Node | null = root;
    while (node && node !== document.documentElement) {
      const parent: Node | null = node.parentNode;
      node = parent instanceof ShadowRoot ? parent.host : parent;
      if (!(node instanceof Element)) {
        continue;
      }
      const style = getComputedStyle(node);
      if (
        /auto|scroll/.test(style.overflowX) &&
        node.scrollWidth > node.clientWidth + 1
      ) {
        out.push(
          `${node.tagName.toLowerCase()}.${node.getAttribute('class') ?? ''} ` +
            `scrolls ${node.scrollWidth} px in ${node.clientWidth} px, ` +
            `past it: ${widest(node).join('; ')}`
        );
      }
    }
    return out;
  });
}

/**
 * Each word of the report's text (letters and digits) that the browser split over two lines:
 * a break inside a word, which wrapping should never make where a space or punctuation could
 * break instead. Code blocks scroll and are left out; so is text drawn off screen on purpose.
 */
export async function brokenWords(report: Locator): Promise<string[]> {
  return report.evaluate((root: Element) => {
    const out: string[] = [];
    const range = document.createRange();
    const check = (text: Text): void => {
      for (const m of (text.data ?? '').matchAll(/[\p{L}\p{N}]{2,}/gu)) {
        range.setStart(text, m.index ?? 0);
        range.setEnd(text, (m.index ?? 0) + m[0].length);
        const tops = new Set(
          [...range.getClientRects()]
            .filter(r => r.width > 0)
            .map(r => Math.round(r.top))
        );
        if (tops.size > 1) {
          const where = text.parentElement;
          const name = where
            ? where.tagName.toLowerCase() +
              (where.getAttribute('class')
                ? `.${where.getAttribute('class')}`
                : '')
            : '?';
          out.push(`"${m[0]}" in ${name}: ${text.data.trim().slice(0, 60)}`);
        }
      }
    };
    const visit = (node: Node, skip: boolean): void => {
      for (const child of node.childNodes) {
        if (child instanceof Text) {
          if (!skip) {
            check(child);
          }
        } else if (child instanceof Element) {
          if (
            child.matches(
              '.jp-Gpusight-srOnly, style, script, pre, svg, title, desc'
            )
          ) {
            continue;
          }
          const scroller = /auto|scroll/.test(
            getComputedStyle(child).overflowX
          );
          visit(child, skip || scroller);
          if (child.shadowRoot) {
            visit(child.shadowRoot, skip || scroller);
          }
        }
      }
    };
    visit(root.shadowRoot ?? root, false);
    return out;
  });
}

/**
 * A screenshot of the whole report, for a person to look at: the page is made as tall as the
 * report for the shot (its width, so its layout, unchanged), since a scroller shows only its part.
 */
export async function wholeShot(report: Locator, file: string): Promise<void> {
  const page = report.page();
  const size = page.viewportSize() ?? { width: 1400, height: 1000 };
  const height = await report.evaluate(el => el.getBoundingClientRect().height);
  await page.setViewportSize({
    width: size.width,
    height: Math.min(Math.max(size.height, Math.ceil(height) + 300), 12_000)
  });
  try {
    await report.evaluate(el => el.scrollIntoView({ block: 'start' }));
    await page.waitForTimeout(300);
    await report.screenshot({ path: file });
  } finally {
    await page.setViewportSize(size);
  }
}
