// The Project screen's file decisions: asking before an import replaces unsaved edits,
// where Save and Save as go, and the downloaded file's name and text.
import { describe, expect, it } from "vitest";
import {
  baselineOf,
  besideAsSextant,
  checkSavePath,
  downloadName,
  hasUnsavedEdits,
  markOf,
  projectFileText,
  replaceStep,
  saveTarget,
  type ReplaceAnswer,
  type ReplaceStep,
} from "../src/screens/project/fileops";

describe("replaceStep: Replace the unsaved project?", () => {
  const table: [boolean, boolean, ReplaceAnswer, ReplaceStep][] = [
    // unsaved, has a file, answer → step
    [false, false, null, "replace"],
    [false, true, null, "replace"],
    [false, false, "cancel", "replace"],
    [true, false, null, "ask"],
    [true, true, null, "ask"],
    [true, false, "cancel", "stay"],
    [true, true, "cancel", "stay"],
    [true, false, "discard", "replace"],
    [true, true, "discard", "replace"],
    [true, true, "save", "save"],
    [true, false, "save", "saveAs"],
  ];
  it.each(table)("unsaved=%s file=%s answer=%s → %s", (unsaved, hasFile, answer, step) => {
    expect(replaceStep(unsaved, hasFile, answer)).toBe(step);
  });
});

describe("unsaved edits from the undo history", () => {
  const table: [string, string[] | null, string[], boolean][] = [
    ["nothing seen yet", null, ["import rig.ssproj", "add group"], false],
    ["as saved", ["import rig.ssproj", "add group"], ["import rig.ssproj", "add group"], false],
    ["an edit since", ["import rig.ssproj"], ["import rig.ssproj", "add group"], true],
    ["undone past the save", ["import rig.ssproj", "add group"], ["import rig.ssproj"], true],
    ["undone then another edit", ["a", "b"], ["a", "c"], true],
  ];
  it.each(table)("%s", (_, saved, undo, want) => {
    expect(hasUnsavedEdits(saved ? markOf(saved) : null, undo)).toBe(want);
  });

  it("before any save was seen, edits after the last open/import/new count", () => {
    expect(hasUnsavedEdits(baselineOf([]), [])).toBe(false);
    expect(hasUnsavedEdits(baselineOf(["import rig.ssproj"]), ["import rig.ssproj"])).toBe(false);
    const edited = ["import rig.ssproj", "add group G"];
    expect(hasUnsavedEdits(baselineOf(edited), edited)).toBe(true);
    const demo = ["rename project"];
    expect(hasUnsavedEdits(baselineOf(demo), demo)).toBe(true);
    const reopened = ["add group G", "open /p/a.json"];
    expect(hasUnsavedEdits(baselineOf(reopened), reopened)).toBe(false);
    const fresh = ["add group G", "new project"];
    expect(hasUnsavedEdits(baselineOf(fresh), fresh)).toBe(false);
  });
});

describe("saveTarget", () => {
  const table: [boolean, boolean, string, ReturnType<typeof saveTarget>][] = [
    // Save as, desktop, project's file → target
    [false, true, "/p/a.json", { kind: "file", path: "/p/a.json" }],
    [false, false, "/p/a.json", { kind: "file", path: "/p/a.json" }],
    [false, true, "", { kind: "native" }],
    [false, false, "", { kind: "dialog" }],
    [false, false, "   ", { kind: "dialog" }],
    [true, true, "/p/a.json", { kind: "native" }],
    [true, false, "/p/a.json", { kind: "dialog" }],
  ];
  it.each(table)("as=%s desktop=%s path=%j", (as, desktop, path, want) => {
    expect(saveTarget(as, desktop, path)).toEqual(want);
  });
});

describe("checkSavePath", () => {
  it("needs a path and never the imported Serial Studio file", () => {
    expect(checkSavePath("  ")).toEqual({ problem: "empty" });
    expect(checkSavePath("/p/rig.ssproj", "/p/rig.ssproj")).toEqual({ problem: "overwritesImport" });
    expect(checkSavePath(" /p/rig.sextant.json ", "/p/rig.ssproj")).toEqual({ path: "/p/rig.sextant.json" });
    expect(checkSavePath("/p/other.ssproj", "/p/rig.ssproj")).toEqual({ path: "/p/other.ssproj" });
  });
});

describe("downloaded project", () => {
  it.each([
    ["Rig", "", "Rig.sextant.json"],
    ["", "", "project.sextant.json"],
    ["a/b: c?", "", "a b c.sextant.json"],
    ["...", "", "project.sextant.json"],
    ["Rig", "/home/me/bench.json", "bench.sextant.json"],
    ["Rig", "C:\\data\\rig.ssproj", "rig.sextant.json"],
    ["Rig", "/x/rig.sextant.json", "rig.sextant.json"],
  ])("title %j, file %j → %j", (title, path, want) => {
    expect(downloadName(title, path)).toBe(want);
  });

  it("is the project as JSON with a final newline", () => {
    const p = { title: "T", sources: [{ id: "src-1" }] };
    const text = projectFileText(p);
    expect(text.endsWith("}\n")).toBe(true);
    expect(JSON.parse(text)).toEqual(p);
    expect(text).toContain('\n  "title": "T"');
  });

  it("an import is saved beside the original, never over it", () => {
    expect(besideAsSextant("/p/rig.ssproj")).toBe("/p/rig.sextant.json");
    expect(besideAsSextant("/p/rig.json")).toBe("/p/rig.sextant.json");
  });
});
