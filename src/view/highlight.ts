/**
 * A tiny tokenizer for fix snippets (Python and shell). It only splits text into classified
 * pieces; the fix card renders each piece through a lit text binding, so nothing in a snippet is
 * ever parsed as HTML. Good enough for the short, well-formed snippets gpusight hands out; it
 * makes no attempt to be a parser.
 */

export type TokenKind =
  | 'plain'
  | 'keyword'
  | 'string'
  | 'number'
  | 'comment'
  | 'builtin'
  | 'def'
  | 'operator'
  | 'decorator'
  | 'variable'
  | 'flag';

export interface Token {
  kind: TokenKind;
  text: string;
}

const PY_KEYWORDS = new Set([
  'False',
  'None',
  'True',
  'and',
  'as',
  'assert',
  'async',
  'await',
  'break',
  'class',
  'continue',
  'def',
  'del',
  'elif',
  'else',
  'except',
  'finally',
  'for',
  'from',
  'global',
  'if',
  'import',
  'in',
  'is',
  'lambda',
  'nonlocal',
  'not',
  'or',
  'pass',
  'raise',
  'return',
  'try',
  'while',
  'with',
  'yield',
  'match',
  'case'
]);

const PY_BUILTINS = new Set([
  'print',
  'len',
  'range',
  'list',
  'dict',
  'set',
  'tuple',
  'int',
  'float',
  'str',
  'bool',
  'isinstance',
  'enumerate',
  'zip',
  'min',
  'max',
  'sum',
  'abs',
  'open',
  'super',
  'type',
  'getattr',
  'setattr',
  'hasattr',
  'iter',
  'next',
  'sorted',
  'map',
  'filter',
  'any',
  'all'
]);

const SHELL_KEYWORDS = new Set([
  'if',
  'then',
  'else',
  'elif',
  'fi',
  'for',
  'in',
  'do',
  'done',
  'while',
  'case',
  'esac',
  'export',
  'function',
  'sudo',
  'unset'
]);

/** Ordered alternatives; the first that matches at the current position wins. */
type Rule = [
  TokenKind | ((text: string, prev: Token | undefined) => TokenKind),
  RegExp
];

const PY_RULES: Rule[] = [
  ['comment', /#[^\n]*/y],
  // Triple-quoted before single-quoted; optional r/b/f/u prefixes.
  [
    'string',
    /(?:[rRbBuUfF]{1,2})?(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$))/y
  ],
  [
    'string',
    /(?:[rRbBuUfF]{1,2})?(?:"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)/y
  ],
  [
    'number',
    /(?:0[xX][0-9a-fA-F_]+|(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][+-]?\d+)?j?)/y
  ],
  ['decorator', /@[A-Za-z_][\w.]*/y],
  [
    (text, prev) => {
      if (PY_KEYWORDS.has(text)) {
        return 'keyword';
      }
      if (
        prev &&
        prev.kind === 'keyword' &&
        (prev.text === 'def' || prev.text === 'class')
      ) {
        return 'def';
      }
      return PY_BUILTINS.has(text) ? 'builtin' : 'plain';
    },
    /[A-Za-z_]\w*/y
  ],
  ['operator', /\*\*=?|\/\/=?|->|[-+*/%=<>!&|^~]=?|:=/y],
  ['plain', /\s+/y],
  ['plain', /[^\s]/y]
];

const SHELL_RULES: Rule[] = [
  ['comment', /#[^\n]*/y],
  ['string', /"(?:[^"\\]|\\.)*"?|'[^']*'?/y],
  ['variable', /\$(?:\{[^}\n]*\}?|[A-Za-z_]\w*|[0-9@#?*$!-])/y],
  ['flag', /--?[A-Za-z][\w-]*/y],
  [
    text => (SHELL_KEYWORDS.has(text) ? 'keyword' : 'plain'),
    /[A-Za-z_][\w.-]*/y
  ],
  ['number', /\d+(?:\.\d+)?/y],
  ['operator', /&&|\|\||[|&;<>=]/y],
  ['plain', /\s+/y],
  ['plain', /[^\s]/y]
];

/**
 * Snippets longer than this are shown as plain text: highlighting one costs a span per token, and
 * a megabyte of code (a hostile or broken report) took ~25 s to lay out.
 */
export const MAX_HIGHLIGHT_CHARS = 32 * 1024;

/**
 * Split `code` into tokens. Concatenating the tokens' text gives back `code` exactly (a test holds
 * this), so highlighting never changes what is copied or inserted.
 */
export function tokenize(code: string, language: string | undefined): Token[] {
  const rules =
    code.length > MAX_HIGHLIGHT_CHARS
      ? null
      : language === 'python'
        ? PY_RULES
        : language === 'shell'
          ? SHELL_RULES
          : null;
  if (!rules) {
    return code ? [{ kind: 'plain', text: code }] : [];
  }
  const out: Token[] = [];
  let pos = 0;
  let prevSignificant: Token | undefined;
  while (pos < code.length) {
    let matched = false;
    for (const [kind, re] of rules) {
      re.lastIndex = pos;
      const m = re.exec(code);
      if (!m || m[0].length === 0) {
        continue;
      }
      const text = m[0];
      const k = typeof kind === 'function' ? kind(text, prevSignificant) : kind;
      const last = out[out.length - 1];
      // Merge neighbours of the same kind so the DOM stays small.
      if (last && last.kind === k && k === 'plain') {
        last.text += text;
      } else {
        out.push({ kind: k, text });
      }
      if (text.trim()) {
        prevSignificant = { kind: k, text };
      }
      pos += text.length;
      matched = true;
      break;
    }
    if (!matched) {
      // Unreachable with the catch-all rules above; kept so a rule edit cannot loop forever.
      out.push({ kind: 'plain', text: code[pos] });
      pos++;
    }
  }
  return out;
}
