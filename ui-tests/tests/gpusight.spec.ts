import { expect, test } from '@jupyterlab/galata';

const PLUGIN_ID = 'gpusight:plugin';

test('gpusight activates without console errors', async ({ page }) => {
  const logs: string[] = [];
  const errors: string[] = [];
  page.on('console', message => {
    logs.push(message.text());
    if (message.type() === 'error') {
      errors.push(message.text());
    }
  });
  page.on('pageerror', error => {
    errors.push(`${error.message}\n${error.stack ?? ''}`);
  });

  // Load JupyterLab again with the listeners attached, so that startup is seen.
  await page.goto();

  expect(
    logs.filter(text => text === 'gpusight extension activated')
  ).toHaveLength(1);
  expect(errors.filter(text => /gpusight/i.test(text))).toEqual([]);
  // The plugin read its settings through the (optional) setting registry.
  expect(logs.some(text => text.startsWith('gpusight settings'))).toBe(true);

  const activated = await page.evaluate(
    id => window.jupyterapp.isPluginActivated(id),
    PLUGIN_ID
  );
  expect(activated).toBe(true);
});

test('the server hands out the settings schema', async ({ page }) => {
  const defaults = await page.evaluate(async id => {
    const plugin = await window.jupyterapp.serviceManager.settings.fetch(id);
    const properties = plugin.schema.properties ?? {};
    return Object.fromEntries(
      Object.entries(properties).map(([key, value]) => [key, value.default])
    );
  }, PLUGIN_ID);
  expect(defaults).toEqual({
    sampleRateHz: 5,
    benchmarkBudgetS: 10,
    historyLength: 3000
  });
});
