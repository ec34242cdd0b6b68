/** Translations: every user-visible string goes through `t(key)`. English and 简体中文.
 *  Each part of the UI keeps its own strings (screens/strings.ts, dashboard/strings.ts,
 *  chat/strings.ts);
 *  a test checks both languages have exactly the same keys. */
import { settings } from "../settings.svelte";
import { strings as shell } from "./shell";
import { strings as screens } from "../../screens/strings";
import { strings as dashboard } from "../../dashboard/strings";
import { strings as chat } from "../../chat/strings";

export type Dict = Record<string, string>;
export const dictionaries: Record<"en" | "zh", Dict> = {
  en: { ...shell.en, ...screens.en, ...dashboard.en, ...chat.en },
  zh: { ...shell.zh, ...screens.zh, ...dashboard.zh, ...chat.zh },
};

/** The string for `key` in the current language; `{name}` placeholders are filled from `vars`. */
export function t(key: string, vars: Record<string, string | number> = {}): string {
  const dict = dictionaries[settings.language] ?? dictionaries.en;
  const s = dict[key] ?? dictionaries.en[key] ?? key;
  return s.replace(/\{(\w+)\}/g, (_, k) => (k in vars ? String(vars[k]) : `{${k}}`));
}
