// "Replace the unsaved project?" as the Project screen runs it before an import or open:
// Cancel changes nothing (no command is sent), Discard goes ahead, Save saves first (to
// the project's file, or through Save as when it has none), and a project without unsaved
// edits is replaced without asking. Each action also clears the last action's message.
import { beforeEach, describe, expect, it, vi } from "vitest";

const sent: { command: string; params: unknown }[] = [];
vi.mock("../src/lib/transport", () => ({
  isTauri: () => false,
  transport: () => ({
    call: async (command: string, params?: unknown) => {
      sent.push({ command, params });
      if (command === "project.get") return { title: "T" };
      if (command === "project.history") return { undo: project.undo, redo: [] };
      if (command === "project.validate") return { valid: true, issues: [] };
      return { ok: true };
    },
    onEvent: () => () => {},
  }),
}));

import { project } from "../src/screens/store.svelte";
import { confirmReplace, files, saveProject, saveTo, unsaved } from "../src/screens/project/files.svelte";

/** Waits until the dialog asks, then answers. */
async function answer(a: "save" | "discard" | "cancel") {
  for (let i = 0; i < 50 && !files.replace; i++) await Promise.resolve();
  expect(files.replace, "the dialog is open").not.toBeNull();
  files.replace!(a);
}

beforeEach(() => {
  sent.length = 0;
  files.mark = null;
  files.replace = null;
  files.saveAs = null;
  project.path = "";
  project.undo = ["import rig.ssproj", "add group G"];
  project.message = { kind: "error", text: "Type the file's path first." };
});

describe("confirmReplace", () => {
  it("asks when there are unsaved edits; Cancel changes nothing", async () => {
    expect(unsaved()).toBe(true);
    const go = confirmReplace();
    await answer("cancel");
    expect(await go).toBe(false);
    expect(sent).toEqual([]);
    expect(project.undo).toEqual(["import rig.ssproj", "add group G"]);
    expect(files.replace).toBeNull();
  });

  it("Discard goes ahead without saving", async () => {
    const go = confirmReplace();
    await answer("discard");
    expect(await go).toBe(true);
    expect(sent.map((s) => s.command)).not.toContain("project.save");
  });

  it("Save saves, then goes ahead; afterwards nothing is unsaved", async () => {
    const go = confirmReplace();
    await answer("save");
    // No file yet: Save as (the browser's dialog) decides where.
    for (let i = 0; i < 50 && !files.saveAs; i++) await Promise.resolve();
    const saved = saveTo("/p/rig.sextant.json");
    expect(await saved).toBe(true);
    files.saveAs!(true);
    expect(await go).toBe(true);
    expect(sent[0]).toEqual({ command: "project.save", params: { path: "/p/rig.sextant.json" } });
    expect(unsaved()).toBe(false);
  });

  it("a project with a file is auto-saved: replacing it needs no question", async () => {
    project.path = "/p/rig.sextant.json";
    expect(unsaved()).toBe(false);
    expect(await confirmReplace()).toBe(true);
    expect(files.replace).toBeNull();
  });

  it("Save of a project without a file opens Save as; cancelling it cancels the import", async () => {
    const go = confirmReplace();
    await answer("save");
    for (let i = 0; i < 50 && !files.saveAs; i++) await Promise.resolve();
    expect(files.saveAs, "the Save as dialog is open").not.toBeNull();
    files.saveAs!(false);
    expect(await go).toBe(false);
    expect(sent).toEqual([]);
  });

  it("does not ask when nothing is unsaved", async () => {
    project.undo = ["import rig.ssproj"];
    expect(await confirmReplace()).toBe(true);
    expect(files.replace).toBeNull();
  });

  it("clears the last action's message when it starts", async () => {
    project.undo = [];
    await confirmReplace();
    expect(project.message).toBeNull();
  });
});

describe("saveProject", () => {
  it("Save as in a browser opens its own dialog instead of reading the open-path box", async () => {
    project.path = "/p/rig.sextant.json";
    const go = saveProject(true);
    expect(project.message).toBeNull();
    for (let i = 0; i < 50 && !files.saveAs; i++) await Promise.resolve();
    expect(files.saveAs).not.toBeNull();
    files.saveAs!(false);
    expect(await go).toBe(false);
    expect(sent).toEqual([]);
  });

  it("Save with a file saves there without asking", async () => {
    project.path = "/p/rig.sextant.json";
    expect(await saveProject(false)).toBe(true);
    expect(sent[0]).toEqual({ command: "project.save", params: { path: "/p/rig.sextant.json" } });
  });
});
