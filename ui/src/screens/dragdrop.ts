/** Opening a project file from this computer. The desktop app gets real paths (Tauri's
 *  drag-drop event, native dialogs) and uses project.open; a browser only gets a file's
 *  contents – dropped on the window or picked in the Project screen's file picker – which
 *  project.openContent takes (a Sextant project, or a Serial Studio one it imports; either
 *  has no file until saved). Either way the outcome shows in the Project screen's message. */
import { isTauri } from "../lib/transport";
import { t, tn } from "../lib/i18n/index.svelte";
import { edit, project, remember, setMessage, showImportReport } from "./store.svelte";
import { navigate } from "./nav";
import { confirmReplace, replaced } from "./project/files.svelte";
import { baseName, dropProblem, errorText } from "./util";

let installed = false;

async function openDropped(path: string) {
  navigate("project");
  // A drop replaces the open project like Open does: unsaved edits are asked about first.
  if (!(await confirmReplace())) return;
  const r = await edit("project.open", { path }, t("project.msg.opened", { path }));
  if (r === undefined) return;
  const imported = showImportReport(baseName(path), r);
  if (!imported) remember(path);
  replaced(imported ? path : "");
}

/** A file from this computer (dropped, or picked in a browser's file input): its text goes
 *  to project.openContent. `others` counts further files dropped with it, which are ignored. */
export async function openLocalFile(file: File | undefined, others = 0): Promise<void> {
  navigate("project");
  const problem = dropProblem(file);
  if (problem || !file) {
    setMessage("error", t(problem?.key ?? "project.msg.dropNothing", problem?.vars));
    return;
  }
  let content: string;
  try {
    content = await file.text();
  } catch (e) {
    setMessage("error", t("project.msg.dropUnreadable", { name: file.name, error: errorText(e) }));
    return;
  }
  const ignored = others > 0 ? ` ${tn("project.msg.dropOthers", others)}` : "";
  const r = await edit("project.openContent", { name: file.name, content }, t("project.msg.openedDropped", { name: file.name }) + ignored);
  if (r === undefined) return;
  // It came from no file: saving must ask for a path rather than overwrite the last one.
  project.path = "";
  const imported = showImportReport(file.name, r);
  replaced(imported ? file.name : "");
  if (imported) setMessage("ok", t("project.msg.importedFile", { name: file.name }) + ignored);
}

export function installProjectDrop(): void {
  if (installed || typeof window === "undefined") return;
  installed = true;
  if (isTauri()) {
    void import("@tauri-apps/api/webview")
      .then(({ getCurrentWebview }) =>
        getCurrentWebview().onDragDropEvent((ev) => {
          if (ev.payload.type === "drop" && ev.payload.paths.length) void openDropped(ev.payload.paths[0]);
        }),
      )
      .catch((e) => setMessage("error", String(e)));
    return;
  }
  const hasFiles = (e: DragEvent) => !!e.dataTransfer && Array.from(e.dataTransfer.types).includes("Files");
  window.addEventListener("dragover", (e) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    if (e.dataTransfer) e.dataTransfer.dropEffect = "copy";
  });
  window.addEventListener("drop", (e) => {
    if (!hasFiles(e)) return;
    // Without preventDefault the browser would navigate away to the dropped file.
    e.preventDefault();
    const files = e.dataTransfer?.files;
    void (async () => {
      // A drop replaces the open project: unsaved edits are asked about first (the file
      // picker asks before it opens, so openLocalFile does not ask again).
      if (!(await confirmReplace())) return;
      await openLocalFile(files?.[0], Math.max(0, (files?.length ?? 0) - 1));
    })();
  });
}
