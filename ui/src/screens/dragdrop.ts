/** Dropping a project file anywhere on the window opens it. The desktop app gets real
 *  paths from Tauri's drag-drop event (project.open); a browser only gets the file's
 *  contents, which project.openContent takes (a Sextant or Serial Studio project; it has
 *  no file until saved). Either way the outcome shows in the Project screen's message. */
import { isTauri } from "../lib/transport";
import { t } from "../lib/i18n/index.svelte";
import { edit, project, remember, setMessage } from "./store.svelte";
import { navigate } from "./nav";
import { dropProblem, errorText } from "./util";

let installed = false;

async function openDropped(path: string) {
  navigate("project");
  const r = await edit("project.open", { path }, t("project.msg.opened", { path }));
  if (r !== undefined) remember(path);
}

/** A file dropped on a browser window: its text goes to project.openContent. */
export async function openDroppedFile(file: File | undefined, others = 0): Promise<void> {
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
  const okText = t("project.msg.openedDropped", { name: file.name }) + (others > 0 ? ` ${t("project.msg.dropOthers", { n: others })}` : "");
  const r = await edit("project.openContent", { name: file.name, content }, okText);
  // It came from no file: saving must ask for a path rather than overwrite the last one.
  if (r !== undefined) project.path = "";
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
    void openDroppedFile(files?.[0], Math.max(0, (files?.length ?? 0) - 1));
  });
}
