/** The project's undo history as a person reads it. The runtime labels each edit for every
 *  door ("update dataset ds-2", "set transform of ds-3"); the editor shows it in plain words
 *  in the person's language, naming the thing by its title, never its id. Pure. */
import type { Key } from "../../lib/i18n/index.svelte";

type Json = Record<string, unknown>;

const KINDS = ["action", "dataset", "group", "source", "workspace"] as const;
type Kind = (typeof KINDS)[number];
const VERBS = ["add", "update", "remove", "move"] as const;
type Verb = (typeof VERBS)[number];

/** The title of the thing `id` names in `project`, if it is there. */
function titleOf(project: Json | null | undefined, id: string): string | null {
  if (!project) return null;
  const lists = ["groups", "sources", "actions", "workspaces"].map((k) => (Array.isArray(project[k]) ? (project[k] as Json[]) : []));
  const datasets = (lists[0] ?? []).flatMap((g) => (Array.isArray(g.datasets) ? (g.datasets as Json[]) : []));
  for (const item of [...lists.flat(), ...datasets]) {
    if (item.id === id) return typeof item.title === "string" && item.title.trim() ? item.title.trim() : null;
  }
  return null;
}

/** The string and values for an edit's label; an unknown label reads as "a change". */
export function editText(label: string, project?: Json | null): { key: Key; vars: Record<string, string> } {
  const text = label.trim();
  const kinded = /^(add|update|remove|move) (action|dataset|group|source|workspace)(?: (.+))?$/.exec(text);
  if (kinded) {
    const [, verb, kind, id] = kinded as unknown as [string, Verb, Kind, string | undefined];
    const what = `project.kind.${kind}` as Key;
    const name = id ? titleOf(project, id) : null;
    return name ? { key: `project.edit.${verb}Named` as Key, vars: { what, name } } : { key: `project.edit.${verb}` as Key, vars: { what } };
  }
  const transform = /^set transform of (.+)$/.exec(text);
  if (transform) {
    const name = titleOf(project, transform[1]);
    return name ? { key: "project.edit.transformNamed", vars: { name } } : { key: "project.edit.transform", vars: {} };
  }
  const opened = /^(open|import) (.+)$/.exec(text);
  if (opened) {
    const name = opened[2].split(/[\\/]/).pop() ?? opened[2];
    return { key: opened[1] === "open" ? "project.edit.open" : "project.edit.import", vars: { name } };
  }
  const fixed: Record<string, Key> = {
    "new project": "project.edit.new",
    "rename project": "project.edit.rename",
    "set parser code": "project.edit.parser",
    "set parser": "project.edit.parser",
    "configure MQTT publisher": "project.edit.mqtt",
    "configure PostgreSQL sink": "project.edit.postgres",
    "keep the quick-plot channels": "project.edit.quickPlot",
  };
  if (fixed[text]) return { key: fixed[text], vars: {} };
  if (/^apply template /.test(text)) return { key: "project.edit.template", vars: {} };
  return { key: "project.edit.other", vars: {} };
}

/** The label as words, with `t` (which fills nested keys such as `{what}`). */
export function editWords(label: string, project: Json | null | undefined, t: (key: Key, vars?: Record<string, string>) => string): string {
  const { key, vars } = editText(label, project);
  const filled = { ...vars };
  if (filled.what) filled.what = t(filled.what as Key);
  return t(key, filled);
}

export { KINDS, VERBS };
