import { defineConfig } from 'vitest/config';

// Unit tests live beside the code (src/**/*.spec.ts). The report tests need no DOM; a spec
// that does can opt in with a `// @vitest-environment happy-dom` comment at its top.
export default defineConfig({
  test: {
    include: ['src/**/*.spec.ts'],
    environment: 'node'
  }
});
