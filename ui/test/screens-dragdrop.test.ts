// What a file dropped on a browser window or picked in its file input may be sent as, and
// how the outcome of project.openContent is read (screens/util.ts, screens/files.ts).
import { describe, expect, it } from "vitest";
import { MAX_DROP_BYTES, dropProblem, importedItems } from "../src/screens/util";
import { PROJECT_FILTERS, SSPROJ_FILTERS, acceptOf } from "../src/screens/files";
import { dictionaries } from "../src/lib/i18n/index.svelte";

describe("dropProblem", () => {
  it("accepts an ordinary project file", () => {
    expect(dropProblem({ name: "p.json", size: 2048 })).toBeNull();
    expect(dropProblem({ name: "p.ssproj", size: MAX_DROP_BYTES })).toBeNull();
  });

  it("refuses nothing, empty and huge files, with existing string keys", () => {
    const cases = [
      dropProblem(undefined),
      dropProblem(null),
      dropProblem({ name: "e.json", size: 0 }),
      dropProblem({ name: "big.bin", size: MAX_DROP_BYTES + 1 }),
    ];
    for (const c of cases) {
      expect(c).not.toBeNull();
      expect(dictionaries.en[c!.key], c!.key).toBeTruthy();
      expect(dictionaries.zh[c!.key], c!.key).toBeTruthy();
    }
    expect(cases[2]!.vars).toEqual({ name: "e.json" });
    expect(cases[3]!.vars).toEqual({ name: "big.bin", mb: 16 });
  });

  it("honours a smaller limit", () => {
    expect(dropProblem({ name: "a", size: 11 }, 10)?.key).toBe("project.msg.dropTooBig");
  });
});

describe("importedItems", () => {
  it("lists what a Serial Studio import did not carry over, one item per line", () => {
    const detail = "imported from Serial Studio format; not mapped:\ngroups[0].widget: \"accelerometer\" needs 3 datasets\nmqtt: not supported";
    expect(importedItems(detail)).toEqual(['groups[0].widget: "accelerometer" needs 3 datasets', "mqtt: not supported"]);
  });

  it("is empty for an import that mapped everything", () => {
    expect(importedItems("imported from Serial Studio format; not mapped:\n")).toEqual([]);
  });

  it("is null when a Sextant project was opened (no import)", () => {
    expect(importedItems(undefined)).toBeNull();
    expect(importedItems("/home/x/rig.sextant.json")).toBeNull();
    expect(importedItems(42)).toBeNull();
  });
});

describe("acceptOf", () => {
  it("lists the extensions of the file pickers' filters, once each", () => {
    expect(acceptOf(PROJECT_FILTERS)).toBe(".json,.sextant");
    expect(acceptOf(SSPROJ_FILTERS)).toBe(".ssproj,.json");
    expect(acceptOf([...PROJECT_FILTERS, ...SSPROJ_FILTERS])).toBe(".json,.sextant,.ssproj");
  });
});
