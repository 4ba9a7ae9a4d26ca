/** Where a long name may wrap: between its parts, never inside a word. */
import { html, type TemplateResult } from 'lit';

// After a dot that joins names (not a decimal point), an underscore, a slash, `=`, `,` or `(`
// followed by more of the name. Browsers break none of these by themselves, so a dotted torch
// flag, an environment variable or a path would otherwise be cut mid-word by `overflow-wrap`.
const JOIN = /(?<=[A-Za-z_)\]]\.|[_/=,(])(?=[^\s.,)=_/])/;

/** The text's parts with a `<wbr>` between them, for a template. */
export function breakable(text: string): (string | TemplateResult)[] {
  const parts = String(text).split(JOIN);
  return parts.flatMap((p, i) => (i ? [html`<wbr />`, p] : [p]));
}
