// Playwright drives a real JupyterLab (started below) in Debian's Chromium: Playwright never
// downloads a browser of its own (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1, executablePath below).
const fs = require('node:fs');
const path = require('node:path');
const baseConfig = require('@jupyterlab/galata/lib/playwright-config');

// The repository's venv has JupyterLab and gpusight; fall back to whatever `jupyter` is on PATH.
const venvJupyter = path.join(__dirname, '..', '.venv', 'bin', 'jupyter');
const jupyter = fs.existsSync(venvJupyter) ? venvJupyter : 'jupyter';

module.exports = {
  ...baseConfig,
  reporter: [[process.env.CI ? 'github' : 'list'], ['html', { open: 'never' }]],
  // JupyterLab on 2 cores takes a while to load; one test at a time.
  timeout: 120 * 1000,
  workers: 1,
  use: {
    ...baseConfig.use,
    browserName: 'chromium',
    headless: true,
    // Video needs Playwright's own ffmpeg, which is never downloaded here.
    video: 'off',
    launchOptions: {
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync'
      ]
    }
  },
  webServer: {
    command: `${jupyter} lab --config jupyter_server_test_config.py`,
    url: 'http://localhost:8888/lab',
    timeout: 180 * 1000,
    reuseExistingServer: !process.env.CI
  }
};
