// What a file dropped on a browser window or picked in its file input may be sent as, and
// how the outcome of project.openContent is read (screens/util.ts, screens/files.ts).
import { describe, expect, it } from "vitest";
import { MAX_DROP_BYTES, dropProblem } from "../src/screens/util";
import { reportLines, sections } from "../src/screens/project/report";
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

describe("import report", () => {
  const result = {
    ok: true,
    report: [
      { severity: "note", subject: { kind: "dataset", name: "VU/Mic L" }, message: "`color` not imported", path: "groups[0].datasets[0].color", count: 12 },
      { severity: "lost", subject: { kind: "group", name: "VU" }, message: "painter widget", path: "groups[0].widget", count: 1 },
      { severity: "bogus", message: "dropped" },
      { severity: "changed", subject: { kind: "source", name: "UART" }, message: "baud rate 0; using 115200", path: "sources[0]", count: 1 },
    ],
  };

  it("reads the lines and puts lost behaviour first, display details last", () => {
    const lines = reportLines(result)!;
    expect(lines).toHaveLength(3);
    expect(sections(lines).map((s) => [s.severity, s.lines.map((l) => l.subject.name)])).toEqual([
      ["lost", ["VU"]],
      ["changed", ["UART"]],
      ["note", ["VU/Mic L"]],
    ]);
    expect(lines.find((l) => l.severity === "note")?.count).toBe(12);
  });

  it("is empty for an import that mapped everything, and absent for a Sextant project", () => {
    expect(reportLines({ ok: true, report: [] })).toEqual([]);
    expect(reportLines({ ok: true, file: "/x/rig.sextant.json" })).toBeNull();
    expect(reportLines(null)).toBeNull();
  });
});

describe("acceptOf", () => {
  it("lists the extensions of the file pickers' filters, once each", () => {
    expect(acceptOf(PROJECT_FILTERS)).toBe(".json,.sextant");
    expect(acceptOf(SSPROJ_FILTERS)).toBe(".ssproj,.json");
    expect(acceptOf([...PROJECT_FILTERS, ...SSPROJ_FILTERS])).toBe(".json,.sextant,.ssproj");
  });
});
