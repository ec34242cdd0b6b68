/** The project as the screens see it: a copy of `project.get`, the undo/redo history and
 *  the validation problems, refreshed after every edit and on `projectChanged` events.
 *  Every edit goes through `edit()`, which records the last success or error message. */
import { transport } from "../lib/transport";
import { failed, t } from "../lib/i18n/index.svelte";
import { errorText, parseRecent, pushRecent } from "./util";
import { reportLines, type ReportLine } from "./project/report";

export type Json = Record<string, any>;

export interface Issue {
  path: string;
  message: string;
}

export interface Message {
  kind: "ok" | "error";
  text: string;
  /** Parameter path of an error, to mark the offending field. */
  path?: string;
}

const RECENT_KEY = "sextant.recentProjects";

export const project = $state({
  data: null as Json | null,
  undo: [] as string[],
  redo: [] as string[],
  issues: [] as Issue[],
  message: null as Message | null,
  /** The file of the open project, as last opened or saved from this UI. */
  path: "",
  recent: parseRecent(globalThis.localStorage?.getItem(RECENT_KEY) ?? null),
  loadError: "",
  /** What the last Serial Studio import did not carry over, until dismissed. */
  importReport: null as { name: string; lines: ReportLine[] } | null,
});

/** Shows the import report of `result` (a project.import/open/openContent answer) for the
 *  file `name`; a result without one (a Sextant project) clears the last report. */
export function showImportReport(name: string, result: unknown): boolean {
  const lines = reportLines(result);
  project.importReport = lines ? { name, lines } : null;
  return lines !== null;
}

export function remember(path: string) {
  project.recent = pushRecent(project.recent, path);
  project.path = path;
  globalThis.localStorage?.setItem(RECENT_KEY, JSON.stringify(project.recent));
}

export function forget(path: string) {
  project.recent = project.recent.filter((p) => p !== path);
  globalThis.localStorage?.setItem(RECENT_KEY, JSON.stringify(project.recent));
}

let refreshing: Promise<void> | null = null;

/** Reloads project, history and validation. Concurrent callers share one round trip. */
export function refresh(): Promise<void> {
  refreshing ??= (async () => {
    try {
      const tr = transport();
      const [data, hist, val] = await Promise.all([
        tr.call<Json>("project.get"),
        tr.call<{ undo: string[]; redo: string[] }>("project.history").catch(() => ({ undo: [], redo: [] })),
        tr.call<{ valid: boolean; issues: Issue[] }>("project.validate").catch(() => ({ valid: true, issues: [] })),
      ]);
      project.data = data;
      project.undo = hist.undo ?? [];
      project.redo = hist.redo ?? [];
      project.issues = val.issues ?? [];
      project.loadError = "";
    } catch (e) {
      project.loadError = errorText(e);
    } finally {
      refreshing = null;
    }
  })();
  return refreshing;
}

export function setMessage(kind: Message["kind"], text: string, path?: string) {
  project.message = { kind, text, path };
}

/** Runs a project command. On success: message `okKey` (or the result's detail) and a
 *  refresh; on failure: the backend's error verbatim, nothing reloaded so forms keep
 *  their input. Returns the result, or undefined on failure. */
export async function edit<T = Json>(
  command: string,
  params: unknown = {},
  okText?: string,
  approved = false,
): Promise<T | undefined> {
  try {
    const r = await transport().call<T>(command, params, approved);
    // An import's report is shown on its own (showImportReport), in the person's language.
    const detail = Array.isArray((r as Json | null)?.report) ? null : (r as Json | null)?.detail;
    const text = okText ?? t("project.msg.done", { command });
    // The backend's detail adds to the message unless it only repeats it (e.g. the path).
    setMessage("ok", detail && !text.includes(String(detail)) ? `${text} – ${detail}` : text);
    await refresh();
    return r;
  } catch (e) {
    setMessage("error", failed(command, errorText(e)), (e as { path?: string })?.path);
    return undefined;
  }
}

let subscribed = false;
/** Follows edits made elsewhere (the assistant, the API, another window). */
export function follow() {
  if (subscribed) return;
  subscribed = true;
  transport().onEvent((e) => {
    if (e.event === "projectChanged" || e.event === "projectSaved") void refresh();
    if (e.event === "projectSaved" && typeof e.path === "string") project.path = e.path;
  });
}
