/** Translations: every user-visible string goes through `t(key)` – or `tn(key, n)` for a
 *  sentence about a count, which English words differently for one. English and 简体中文.
 *  Each part of the UI keeps its own strings (screens/strings.ts, dashboard/strings.ts,
 *  chat/strings.ts);
 *  a test checks both languages have exactly the same keys.
 *
 *  Keys are typed: `t` takes only a `Key` (a key of some English table), and each Chinese
 *  table is a `Record` of its English keys, so a missing translation or a mistyped key is a
 *  type error. A key built from a value the types cannot see (a command's name, a kind read
 *  from a project file) goes through `keyOr` or `tOr`, which check it at run time. */
import { settings } from "../settings.svelte";
import { strings as shell, type Key as ShellKey } from "./shell";
import { strings as screens, type Key as ScreensKey } from "../../screens/strings";
import { strings as dashboard, type Key as DashboardKey } from "../../dashboard/strings";
import { strings as chat, type Key as ChatKey } from "../../chat/strings";

/** Every string's key. */
export type Key = ShellKey | ScreensKey | DashboardKey | ChatKey;
/** The keys `tn` takes: the bases of keys that have both a `.one` and an `.other` form. */
export type PluralKey = PluralBase<Key>;
type PluralBase<K> = K extends `${infer Base}.other` ? (`${Base}.one` extends Key ? Base : never) : never;

export type Dict = Record<Key, string>;
export const dictionaries: Record<"en" | "zh", Dict> = {
  en: { ...shell.en, ...screens.en, ...dashboard.en, ...chat.en },
  zh: { ...shell.zh, ...screens.zh, ...dashboard.zh, ...chat.zh },
};

/** Whether `key` has a string (in English, which has every key). */
export function has(key: string): key is Key {
  return Object.hasOwn(dictionaries.en, key);
}

/** `key` when it has a string, else `fallback`: for a key built at run time from a value
 *  the types do not know (`import.kind.${kind}` of an import report's line). */
export function keyOr(key: string, fallback: Key): Key {
  return has(key) ? key : fallback;
}

/** The string for `key` when it has one, else `otherwise` as it is: for a key built at run
 *  time (`connect.type.${type}` of a project's source) whose value may be one the UI has no
 *  name for. */
export function tOr(key: string, otherwise: string, vars: Record<string, string | number> = {}): string {
  return has(key) ? t(key, vars) : otherwise;
}

/** "What failed: why", for a failed command a screen ran, in the person's language. */
export function failed(command: string, why: string): string {
  return `${t(failKeyOf(command))}: ${why}`;
}

/** The `fail.*` key for a command: its own entry, else its namespace's, else a general one –
 *  never the command's name, which means nothing to a person. */
export function failKeyOf(command: string): Key {
  const parts = command.split(".");
  for (let n = parts.length; n > 0; n--) {
    const key = `fail.${parts.slice(0, n).join(".")}`;
    if (has(key)) return key;
  }
  return "fail.generic";
}

/** The string for `key` in the current language; `{name}` placeholders are filled from `vars`. */
export function t(key: Key, vars: Record<string, string | number> = {}): string {
  const dict = dictionaries[settings.language] ?? dictionaries.en;
  const s = dict[key] ?? dictionaries.en[key] ?? key;
  return s.replace(/\{(\w+)\}/g, (_, k) => (k in vars ? String(vars[k]) : `{${k}}`));
}

const pluralRules = new Map<string, Intl.PluralRules>();

/** The string for a count `n`: `key.one`, `key.other`, … as the language's plural rules pick
 *  (English: one for 1; Chinese has one form, `other`), falling back to `key.other`; `{n}`
 *  and `vars` are filled. Each language keeps both keys, so the key sets stay identical. */
export function tn(key: PluralKey, n: number, vars: Record<string, string | number> = {}): string {
  const lang = settings.language;
  let rules = pluralRules.get(lang);
  if (!rules) pluralRules.set(lang, (rules = new Intl.PluralRules(lang === "zh" ? "zh-CN" : "en")));
  const form = `${key}.${rules.select(n)}`;
  return t(has(form) ? form : `${key}.other`, { n, ...vars });
}
