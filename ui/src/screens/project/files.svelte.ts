/** The Project screen's file operations that outlive one component: Save / Save as
 *  (native dialog in the desktop app; in a browser the Save as dialog, which downloads the
 *  file or saves it on the machine running Sextant), "Replace the unsaved project?" before
 *  an import or open, and what the page knows of unsaved edits. The decisions are the pure
 *  functions of `fileops.ts`. */
import { isTauri, transport } from "../../lib/transport";
import { t } from "../../lib/i18n/index.svelte";
import { edit, project, refresh, remember, setMessage, type Json } from "../store.svelte";
import { PROJECT_FILTERS, pickSave } from "../files";
import { errorText } from "../util";
import { reportLines } from "./report";
import {
  baselineOf,
  besideAsSextant,
  downloadName,
  hasUnsavedEdits,
  markOf,
  projectFileText,
  replaceStep,
  saveTarget,
  type ReplaceAnswer,
  type SavedMark,
} from "./fileops";

export const files = $state({
  /** The undo history when the project was last saved, opened or imported from here. */
  mark: null as SavedMark | null,
  /** Where an unsaved project would be saved (beside an imported file, never over it). */
  suggestion: "",
  /** The Serial Studio file the open project was imported from, if any. */
  importedFrom: "",
  /** Open while "Replace the unsaved project?" waits for its answer. */
  replace: null as null | ((a: Exclude<ReplaceAnswer, null>) => void),
  /** Open while the browser's Save as dialog waits. */
  saveAs: null as null | ((saved: boolean) => void),
});

/** Whether the open project has edits not saved anywhere. A project with a file is
 *  auto-saved by the backend (a second after each edit), so only one without a file – new,
 *  imported, dropped, or the demo – can lose edits. */
export function unsaved(): boolean {
  if (project.path) return false;
  return hasUnsavedEdits(files.mark ?? baselineOf(project.undo), project.undo);
}

/** The project as it is now counts as saved (after a save, open, import or download). */
export function markSaved(): void {
  files.mark = markOf(project.undo);
}

/** A new action starts: the last one's message no longer applies (and must not sit behind
 *  a consent dialog). */
export function clearMessage(): void {
  project.message = null;
}

let tracking = false;
/** Follows saves made elsewhere (auto-save, the assistant, another window), once. */
export function trackSaves(): void {
  if (tracking) return;
  tracking = true;
  transport().onEvent((e) => {
    if (e.event === "projectSaved") void refresh().then(markSaved);
  });
}

/** Learns the open project's file – and, when the backend says so, the Serial Studio file it
 *  was imported from and that import's report (a project given on the command line is
 *  opened before any page exists). Fields the backend does not send are left alone. */
export async function learnFile(): Promise<void> {
  try {
    const r = await transport().call<Json>("project.file");
    if (typeof r?.path === "string") project.path = r.path;
    const from = typeof r?.importedFrom === "string" ? r.importedFrom : "";
    if (from) {
      files.importedFrom = from;
      files.suggestion = besideAsSextant(from);
      const lines = reportLines(r);
      if (lines && !project.importReport) project.importReport = { name: from.split(/[\\/]/).pop() ?? from, lines };
    }
  } catch {
    // An older backend, or none yet: nothing to learn.
  }
}

/** Saves the project; `as` asks where. Returns whether it was saved. */
export async function saveProject(as: boolean): Promise<boolean> {
  clearMessage();
  const target = saveTarget(as, isTauri(), project.path);
  let path: string;
  if (target.kind === "file") path = target.path;
  else if (target.kind === "native") {
    try {
      const p = await pickSave(PROJECT_FILTERS, project.path || files.suggestion || "project.sextant.json");
      if (!p) return false;
      path = p;
    } catch (e) {
      setMessage("error", errorText(e));
      return false;
    }
  } else {
    return new Promise<boolean>((resolve) => (files.saveAs = resolve));
  }
  return saveTo(path);
}

/** project.save to `path` on the machine running Sextant. */
export async function saveTo(path: string): Promise<boolean> {
  const r = await edit("project.save", { path }, t("project.msg.saved", { path }));
  if (r === undefined) return false;
  remember(path);
  files.suggestion = "";
  markSaved();
  return true;
}

/** Browser: the project file to this computer, through the browser's downloads. */
export async function downloadProject(): Promise<boolean> {
  clearMessage();
  try {
    const data = await transport().call<Json>("project.get");
    const name = downloadName(String(data?.title ?? ""), project.path || files.suggestion);
    const url = URL.createObjectURL(new Blob([projectFileText(data)], { type: "application/json" }));
    const a = document.createElement("a");
    a.href = url;
    a.download = name;
    a.rel = "noopener";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 0);
    setMessage("ok", t("project.msg.downloaded", { name }));
    markSaved();
    return true;
  } catch (e) {
    setMessage("error", errorText(e));
    return false;
  }
}

/** Before replacing the project (import, open, a dropped file): asks "Replace the unsaved
 *  project?" when it has unsaved edits, saves if asked to. True when the replacement may go
 *  ahead; false changes nothing. */
export async function confirmReplace(): Promise<boolean> {
  clearMessage();
  let answer: ReplaceAnswer = null;
  for (;;) {
    const step = replaceStep(unsaved(), !!project.path, answer);
    switch (step) {
      case "replace":
        return true;
      case "stay":
        return false;
      case "ask":
        answer = await new Promise<Exclude<ReplaceAnswer, null>>((resolve) => (files.replace = resolve));
        files.replace = null;
        continue;
      case "save":
      case "saveAs":
        return saveProject(step === "saveAs");
    }
  }
}

/** After an import or open: what it left is the new saved state. */
export function replaced(importedFrom: string): void {
  files.importedFrom = importedFrom;
  files.suggestion = importedFrom ? besideAsSextant(importedFrom) : "";
  markSaved();
}
