import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, readSettings } from './settings';

describe('readSettings', () => {
  it('matches the schema defaults and bounds', () => {
    const schema = JSON.parse(readFileSync('schema/plugin.json', 'utf-8'));
    const p = schema.properties;
    expect(DEFAULT_SETTINGS).toEqual({
      sampleRateHz: p.sampleRateHz.default,
      benchmarkBudgetS: p.benchmarkBudgetS.default,
      historyLength: p.historyLength.default
    });
    expect(
      readSettings({
        sampleRateHz: 1e9,
        benchmarkBudgetS: -1,
        historyLength: 1e9
      })
    ).toEqual({
      sampleRateHz: p.sampleRateHz.maximum,
      benchmarkBudgetS: p.benchmarkBudgetS.minimum,
      historyLength: p.historyLength.maximum
    });
  });

  it('takes the defaults for what is missing or not a number', () => {
    expect(readSettings({})).toEqual(DEFAULT_SETTINGS);
    expect(readSettings({ sampleRateHz: '10', historyLength: NaN })).toEqual(
      DEFAULT_SETTINGS
    );
    expect(
      readSettings({ sampleRateHz: 8, historyLength: 600.4 })
    ).toMatchObject({
      sampleRateHz: 8,
      historyLength: 600
    });
  });
});
