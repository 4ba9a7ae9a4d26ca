/** The sidebar's settings (schema/plugin.json, plugin id `gpusight:plugin`), read defensively. */

export const SETTINGS_ID = 'gpusight:plugin';

export interface SidebarSettings {
  sampleRateHz: number;
  benchmarkBudgetS: number;
  historyLength: number;
}

/** The schema's defaults. */
export const DEFAULT_SETTINGS: SidebarSettings = {
  sampleRateHz: 5,
  benchmarkBudgetS: 10,
  historyLength: 3000
};

/**
 * Settings within the schema's bounds; a missing or non-numeric value takes its default (the
 * registry validates, but a hand-edited overrides.json reaches us too).
 */
export function readSettings(
  composite: Record<string, unknown>
): SidebarSettings {
  const num = (key: keyof SidebarSettings, lo: number, hi: number): number => {
    const v = composite[key];
    return typeof v === 'number' && Number.isFinite(v)
      ? Math.min(hi, Math.max(lo, v))
      : DEFAULT_SETTINGS[key];
  };
  return {
    sampleRateHz: num('sampleRateHz', 2, 10),
    benchmarkBudgetS: num('benchmarkBudgetS', 1, 600),
    historyLength: Math.round(num('historyLength', 60, 36000))
  };
}
