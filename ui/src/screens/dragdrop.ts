/** Dropping a project file anywhere on the window opens it. The desktop app gets real
 *  paths from Tauri's drag-drop event; a browser only gets file contents, which no command
 *  accepts yet (project.open/import take a path), so it says so instead of failing silently. */
import { isTauri } from "../lib/transport";
import { t } from "../lib/i18n/index.svelte";
import { edit, remember, setMessage } from "./store.svelte";
import { navigate } from "./nav";

let installed = false;

async function openDropped(path: string) {
  navigate("project");
  const r = await edit("project.open", { path }, t("project.msg.opened", { path }));
  if (r !== undefined) remember(path);
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
    if (hasFiles(e)) e.preventDefault();
  });
  window.addEventListener("drop", (e) => {
    if (!hasFiles(e)) return;
    // Without preventDefault the browser would navigate away to the dropped file.
    e.preventDefault();
    const name = e.dataTransfer?.files[0]?.name ?? "";
    navigate("project");
    setMessage("error", t("project.msg.dropBrowser", { name }));
  });
}
