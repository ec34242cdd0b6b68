// What a file dropped on a browser window may be sent as (screens/util.ts dropProblem).
import { describe, expect, it } from "vitest";
import { MAX_DROP_BYTES, dropProblem } from "../src/screens/util";
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
