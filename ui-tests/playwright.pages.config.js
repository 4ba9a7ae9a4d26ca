// Specs that open plain pages (no JupyterLab server): `npx playwright test -c
// playwright.pages.config.js`. The full config (playwright.config.js) runs them too.
const config = require('./playwright.config.js');

module.exports = {
  ...config,
  testMatch: ['several-reports.spec.ts'],
  webServer: undefined
};
