/** User preferences kept in the browser's storage: theme, language, display rate. The
 *  display rate's bounds are the backend's own (`limits.gen.ts`, generated from
 *  `sextant_display::MIN_RATE_HZ`/`MAX_RATE_HZ`, which `DisplayOptions::validate` checks). */
import { MAX_RATE_HZ, MIN_RATE_HZ } from "./display/limits.gen";

export type Theme = "light" | "dark" | "system";
export type Language = "en" | "zh";

export interface Settings {
  theme: Theme;
  language: Language;
  /** The display rate, ticks per second, MIN_RATE_HZ–MAX_RATE_HZ: `refreshHz` end to end
   *  (the display options, `dashboard.setView`, the project). */
  refreshHz: number;
  /** Points per plot after decimation. */
  points: number;
  /** Visible window of time plots, seconds. */
  timeRangeS: number;
}

const KEY = "sextant.settings";
export const DEFAULTS: Settings = { theme: "system", language: "en", refreshHz: 60, points: 1000, timeRangeS: 10 };

/** The settings from what was saved under `KEY`, of this version or an earlier one: the
 *  display rate was saved as `displayRateHz` before it was `refreshHz`, and a person's
 *  saved rate is not lost (the next save writes it under its new name only). */
export function fromSaved(saved: unknown): Settings {
  if (typeof saved !== "object" || saved === null || Array.isArray(saved)) return { ...DEFAULTS };
  const { displayRateHz, ...rest } = saved as Partial<Settings> & { displayRateHz?: unknown };
  const migrated = rest.refreshHz === undefined && typeof displayRateHz === "number" ? { refreshHz: displayRateHz } : {};
  return sanitize({ ...DEFAULTS, ...rest, ...migrated });
}

function load(): Settings {
  try {
    return fromSaved(JSON.parse(globalThis.localStorage?.getItem(KEY) ?? "{}"));
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
    refreshHz: clamp(s.refreshHz, MIN_RATE_HZ, MAX_RATE_HZ, DEFAULTS.refreshHz),
    points: clamp(s.points, 2, 100000, DEFAULTS.points),
    timeRangeS: Number.isFinite(s.timeRangeS) && s.timeRangeS > 0 ? Math.min(s.timeRangeS, 86400) : DEFAULTS.timeRangeS,
  };
}

export const settings: Settings = $state(load());

export function saveSettings() {
  Object.assign(settings, sanitize({ ...settings }));
  globalThis.localStorage?.setItem(KEY, JSON.stringify(settings));
}
