// The source-kind registry (screens/connection.ts::SOURCE_KINDS) against the Rust model:
// every connection kind of the generated wire schema has an entry (or is set up on another
// screen, said so explicitly), and each entry is whole.
import { describe, expect, it } from "vitest";
import schemaText from "../src/lib/wire/schema.json?raw";
import { SET_UP_ELSEWHERE, SOURCE_KINDS, SOURCE_TYPES, buildConnection, defaultForm, defaultTitle, formErrors, type SourceType } from "../src/screens/connection";
import { dictionaries } from "../src/lib/i18n/index.svelte";

type Node = { const?: string; properties?: Record<string, Node>; allOf?: Node[]; oneOf?: Node[] };
const definitions: Record<string, Node> = JSON.parse(schemaText).definitions;

/** The `type` tag of each variant of the schema's `Connection`. */
function connectionKinds(): string[] {
  const tag = (n: Node): string | undefined => n.properties?.type?.const ?? n.allOf?.map(tag).find((t) => t !== undefined);
  const variants = definitions.Connection?.oneOf ?? [];
  return variants.map((v) => {
    const t = tag(v);
    expect(t, `a Connection variant without a type tag: ${JSON.stringify(v).slice(0, 120)}`).toBeDefined();
    return t!;
  });
}

describe("the source kinds", () => {
  const kinds = connectionKinds();

  it("cover every connection kind of the project model", () => {
    expect(kinds).toContain("serial");
    expect(kinds.length).toBeGreaterThanOrEqual(SOURCE_TYPES.length);
    const elsewhere = new Set<string>(SET_UP_ELSEWHERE);
    const missing = kinds.filter((k) => !Object.hasOwn(SOURCE_KINDS, k) && !elsewhere.has(k));
    expect(missing, "connection kinds with no SOURCE_KINDS entry").toEqual([]);
  });

  it("name only kinds the project model has, each once", () => {
    expect([...SOURCE_TYPES, ...SET_UP_ELSEWHERE].filter((k) => !kinds.includes(k))).toEqual([]);
    expect(SOURCE_TYPES.filter((k) => (SET_UP_ELSEWHERE as readonly string[]).includes(k))).toEqual([]);
  });

  it("are offered in the registry's order, serial first", () => {
    expect(SOURCE_TYPES).toEqual(Object.keys(SOURCE_KINDS));
    expect(SOURCE_TYPES[0]).toBe("serial");
  });

  for (const type of Object.keys(SOURCE_KINDS) as SourceType[]) {
    it(`${type}: a label in both languages, defaults, a connection of its own type, a title and fields`, async () => {
      const kind = SOURCE_KINDS[type];
      expect(dictionaries.en[kind.label]).toBeTruthy();
      expect(dictionaries.zh[kind.label]).toBeTruthy();
      const f = defaultForm();
      f.type = type;
      expect(f[type]).toEqual(kind.defaults());
      expect(buildConnection(f).type).toBe(type);
      expect(typeof defaultTitle(f)).toBe("string");
      expect(Array.isArray(formErrors(f))).toBe(true);
      const fields = await kind.fields();
      expect(typeof fields.default).toBe("function");
      expect(kind.fields(), "loaded once").toBe(kind.fields());
    });
  }
});
