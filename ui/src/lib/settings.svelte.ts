/** User preferences kept in the browser's storage: theme, language, display rate. The
 *  display rate's bounds are the backend's own (`limits.gen.ts`, generated from
 *  `sextant_display::MIN_RATE_HZ`/`MAX_RATE_HZ`, which `DisplayOptions::validate` checks). */
import { MAX_RATE_HZ, MIN_RATE_HZ } from "./display/limits.gen";

export type Theme = "light" | "dark" | "system";
export type Language = "en" | "zh";

export interface Settings {
  theme: Theme;
  language: Language;
  /** Display ticks per second (`rateHz` of the display options), MIN_RATE_HZ–MAX_RATE_HZ. */
  displayRateHz: number;
  /** Points per plot after decimation. */
  points: number;
  /** Visible window of time plots, seconds. */
  timeRangeS: number;
}

const KEY = "sextant.settings";
export const DEFAULTS: Settings = { theme: "system", language: "en", displayRateHz: 60, points: 1000, timeRangeS: 10 };

function load(): Settings {
  try {
    const saved = JSON.parse(globalThis.localStorage?.getItem(KEY) ?? "{}");
    return sanitize({ ...DEFAULTS, ...saved });
  } catch {
    return { ...DEFAULTS };
  }
}

export function sanitize(s: Settings): Settings {
  const clamp = (x: number, lo: number, hi: number, d: number) =>
    Number.isFinite(x) ? Math.min(hi, Math.max(lo, Math.round(x))) : d;
  return {
    theme: (["light", "dark", "system"] as const).includes(s.theme) ? s.theme : DEFAULTS.theme,
    language: s.language === "zh" ? "zh" : "en",
    displayRateHz: clamp(s.displayRateHz, MIN_RATE_HZ, MAX_RATE_HZ, DEFAULTS.displayRateHz),
    points: clamp(s.points, 2, 100000, DEFAULTS.points),
    timeRangeS: Number.isFinite(s.timeRangeS) && s.timeRangeS > 0 ? Math.min(s.timeRangeS, 86400) : DEFAULTS.timeRangeS,
  };
}

export const settings: Settings = $state(load());

export function saveSettings() {
  Object.assign(settings, sanitize({ ...settings }));
  globalThis.localStorage?.setItem(KEY, JSON.stringify(settings));
}
