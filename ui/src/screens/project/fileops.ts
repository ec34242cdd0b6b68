/** The decisions behind the Project screen's file operations, pure so tests pin them:
 *  whether the open project has unsaved edits, what replacing it (import, open, a dropped
 *  file) does after the person's answer, where Save and Save as go, and the name and text
 *  of a downloaded project file. */

/** Where the undo history stood when the project was last saved, opened or imported: its
 *  depth and newest label. Open and import are undo steps themselves, so any edit after
 *  them – and any undo past them – moves the history away from the mark. */
export interface SavedMark {
  depth: number;
  top: string;
}

export function markOf(undo: readonly string[]): SavedMark {
  return { depth: undo.length, top: undo.at(-1) ?? "" };
}

/** Whether the project has edits the person has not saved: its undo history moved since
 *  the mark. Without a mark (nothing seen yet) there is nothing to lose. */
export function hasUnsavedEdits(mark: SavedMark | null, undo: readonly string[]): boolean {
  if (!mark) return false;
  const now = markOf(undo);
  return now.depth !== mark.depth || now.top !== mark.top;
}

/** The person's answer to "Replace the unsaved project?"; null before asking. */
export type ReplaceAnswer = "save" | "discard" | "cancel" | null;

/** What to do before an import (or open) replaces the project:
 *  - `replace`: go ahead;
 *  - `ask`: show Save / Discard / Cancel first;
 *  - `save`: save to the project's file, then replace (not if the save fails);
 *  - `saveAs`: the project has no file: ask where to save it, then replace;
 *  - `stay`: the person cancelled: change nothing. */
export type ReplaceStep = "replace" | "ask" | "save" | "saveAs" | "stay";

export function replaceStep(unsaved: boolean, hasFile: boolean, answer: ReplaceAnswer): ReplaceStep {
  if (!unsaved) return "replace";
  switch (answer) {
    case null:
      return "ask";
    case "cancel":
      return "stay";
    case "discard":
      return "replace";
    case "save":
      return hasFile ? "save" : "saveAs";
  }
}

/** Where Save and Save as write:
 *  - `file`: the project's own file (`path`);
 *  - `native`: the desktop app's save dialog;
 *  - `dialog`: the browser's Save as dialog (download, or a path on the machine running
 *    Sextant). A browser page has no save dialog of its own, and a path typed to *open* a
 *    file is never taken as where to save. */
export type SaveTarget = { kind: "file"; path: string } | { kind: "native" } | { kind: "dialog" };

export function saveTarget(as: boolean, desktop: boolean, projectPath: string): SaveTarget {
  const path = projectPath.trim();
  if (!as && path) return { kind: "file", path };
  return desktop ? { kind: "native" } : { kind: "dialog" };
}

/** `rig.ssproj` → `rig.sextant.json`, beside it: where an imported project is suggested to
 *  be saved, never over the original. */
export function besideAsSextant(p: string): string {
  return p.replace(/(\.sextant)?\.(ssproj|json)$/i, "") + ".sextant.json";
}

/** The file name a downloaded project gets: its file's name if it has one, else its title
 *  made safe for a file name, else `project`; always `….sextant.json`. */
export function downloadName(title: string, path = ""): string {
  const base = path.split(/[\\/]/).pop() ?? "";
  if (base.trim()) return besideAsSextant(base.trim());
  const safe = title
    .replace(/[\\/:*?"<>|\u0000-\u001f]+/g, " ")
    .replace(/\s+/g, " ")
    .trim()
    .replace(/^\.+/, "");
  return `${safe || "project"}.sextant.json`;
}

/** The text of a downloaded project: `project.get` as the backend gave it, written the way
 *  Sextant writes its files (two-space indents, a final newline). */
export function projectFileText(project: unknown): string {
  return JSON.stringify(project, null, 2) + "\n";
}

/** A Save-as path typed in the browser's dialog: trimmed, or a reason it cannot be used. */
export function checkSavePath(typed: string, original = ""): { path: string } | { problem: "empty" | "overwritesImport" } {
  const path = typed.trim();
  if (!path) return { problem: "empty" };
  // An imported Serial Studio file is never overwritten with a Sextant project.
  if (original && path === original.trim() && /\.ssproj$/i.test(path)) return { problem: "overwritesImport" };
  return { path };
}

/** Labels of the undo steps that replace the whole project (the backend's `open …`,
 *  `import …`, `new project`). */
export function isReplacement(label: string): boolean {
  return label === "new project" || label.startsWith("open ") || label.startsWith("import ");
}

/** The mark to assume before this page saw a save: just after the last time the whole
 *  project was replaced (an import has nothing of the person's to lose), else the start. */
export function baselineOf(undo: readonly string[]): SavedMark {
  let i = undo.length - 1;
  while (i >= 0 && !isReplacement(undo[i])) i--;
  return markOf(undo.slice(0, i + 1));
}
