import { describe, expect, it } from "vitest";
// @ts-expect-error – a plain ES module without types: the generator the UI's types come from.
import { checkedInTypes, wireTypes } from "../scripts/gen-wire.mjs";

describe("the wire types", () => {
  it("are generated from the Rust types' schema, and the generated file is current", async () => {
    const fresh: string = await wireTypes();
    // A Rust wire type changed (and the schema was regenerated) but the UI's types were not:
    // run `npm --prefix ui run gen:wire`.
    expect(checkedInTypes()).toBe(fresh);
    expect(fresh).toContain("export interface Project");
  }, 30000);
});
