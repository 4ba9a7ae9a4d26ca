// ESLint 9 flat config: typescript-eslint's recommended rules, plus a few that catch real bugs
// in this code base. Formatting is prettier's job, not eslint's.
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig([
  globalIgnores([
    'lib/',
    'node_modules/',
    'src/report/generated/',
    'python_pkg/',
    'ui-tests/test-results/',
    'ui-tests/playwright-report/'
  ]),
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      // Unused names are dead code; a leading underscore marks a parameter kept for its position.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { args: 'after-used', argsIgnorePattern: '^_', varsIgnorePattern: '^_' }
      ],
      '@typescript-eslint/consistent-type-imports': [
        'error',
        { fixStyle: 'separate-type-imports' }
      ],
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-non-null-assertion': 'warn',
      // Untrusted report strings must never become HTML (docs/architecture.md, principle 5).
      'no-restricted-properties': [
        'error',
        {
          property: 'innerHTML',
          message: 'Report strings stay text: use textContent or lit templates.'
        },
        {
          property: 'outerHTML',
          message: 'Report strings stay text: use textContent or lit templates.'
        }
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: "CallExpression[callee.property.name='insertAdjacentHTML']",
          message: 'Report strings stay text: use textContent or lit templates.'
        }
      ],
      eqeqeq: ['error', 'smart'],
      curly: ['error', 'all'],
      'prefer-const': 'error'
    }
  },
  {
    // Tests poke at malformed data on purpose.
    files: ['**/*.spec.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off'
    }
  }
]);
