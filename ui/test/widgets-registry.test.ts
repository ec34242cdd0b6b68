// The widget registry against the Rust project model: every widget a project file can name
// (read from the generated wire schema, which the Rust types write) has a registry entry or
// an explicit stand-in, and a tile of a kind this version does not know says so.
import { describe, expect, it } from "vitest";
import { render } from "svelte/server";
import schemaText from "../src/lib/wire/schema.json?raw";
import { STAND_INS, WIDGETS, sizeOf, widgetFor, type TileData } from "../src/widgets/registry";
import { autoTiles, groupKind, resolveTiles, standsInFor, type TileSpec } from "../src/dashboard/layout";
import { DATASET_WIDGETS, GROUP_WIDGETS } from "../src/screens/project/enums";
import { dictionaries } from "../src/lib/i18n/index.svelte";
import { settings } from "../src/lib/settings.svelte";
import type { Dataset, Group } from "../src/lib/model";
import WidgetView from "../src/dashboard/WidgetView.svelte";

type SchemaNode = { enum?: string[]; const?: string; oneOf?: SchemaNode[]; anyOf?: SchemaNode[] };
const definitions: Record<string, SchemaNode> = JSON.parse(schemaText).definitions;

/** The string values of a schema enum (`enum`, or a `oneOf` of enums and consts). */
function values(name: string): string[] {
  const node = definitions[name];
  expect(node, `the wire schema defines ${name}`).toBeDefined();
  const out: string[] = [];
  const walk = (n: SchemaNode) => {
    if (n.enum) out.push(...n.enum);
    if (n.const !== undefined) out.push(n.const);
    for (const m of [...(n.oneOf ?? []), ...(n.anyOf ?? [])]) walk(m);
  };
  walk(node);
  expect(out.length, `${name} has values`).toBeGreaterThan(0);
  return out;
}

const groupWidgets = values("GroupWidget");
const datasetWidgets = values("DatasetWidget");
const tileViews = values("TileView");

const drawnGroups = new Set<string>(WIDGETS.flatMap((w) => ("group" in w.project ? [...w.project.group] : [])));
const standInGroups = new Set<string>(STAND_INS.map((s) => s.group));
const drawnDatasets = new Set<string>(WIDGETS.flatMap((w) => ("dataset" in w.project ? [w.project.dataset] : [])));
const drawnViews = new Set<string>(WIDGETS.flatMap((w) => ("view" in w.project ? [w.project.view] : [])));

describe("the widget registry", () => {
  it("has an entry or a stand-in for every group widget of the project model", () => {
    expect(groupWidgets).toContain("dataGrid");
    const missing = groupWidgets.filter((w) => !drawnGroups.has(w) && !standInGroups.has(w));
    expect(missing, "group widgets with neither a registry entry nor a stand-in").toEqual([]);
    expect([...drawnGroups].filter((w) => standInGroups.has(w)), "drawn and stood in for at once").toEqual([]);
  });

  it("has an entry for every dataset widget of the project model", () => {
    expect(datasetWidgets).toContain("gauge");
    // "none" is a dataset without a widget of its own: it has no view to draw.
    const missing = datasetWidgets.filter((w) => w !== "none" && !drawnDatasets.has(w));
    expect(missing, "dataset widgets with no registry entry").toEqual([]);
  });

  it("has an entry for every view a dataset tile can name", () => {
    expect(tileViews).toContain("plot");
    // "widget" is the dataset's own widget, one of the dataset widgets above.
    expect(tileViews.filter((v) => v !== "widget" && !drawnViews.has(v))).toEqual([]);
  });

  it("names only widgets the project model has", () => {
    expect([...drawnGroups, ...standInGroups].filter((w) => !groupWidgets.includes(w))).toEqual([]);
    expect([...drawnDatasets].filter((w) => !datasetWidgets.includes(w))).toEqual([]);
    expect([...drawnViews].filter((w) => !tileViews.includes(w))).toEqual([]);
  });

  it("has one entry per kind, each with a label in every language, a size and a description", () => {
    const kinds = WIDGETS.map((w) => w.kind);
    expect(new Set(kinds).size).toBe(kinds.length);
    for (const w of WIDGETS) {
      expect(dictionaries.en[w.label], w.kind).toBeTruthy();
      expect(dictionaries.zh[w.label], w.kind).toBeTruthy();
      expect(w.description.length, w.kind).toBeGreaterThan(10);
      const [cols, rows] = w.size;
      expect(cols >= 1 && cols <= 12 && rows >= 1, w.kind).toBe(true);
    }
    for (const s of STAND_INS) {
      expect(widgetFor(s.drawnAs), s.group).toBeDefined();
      expect(dictionaries.en[`dash.standIn.${s.group}`], s.group).toBeTruthy();
    }
  });

  it("is what the project editor offers: the schema's widgets, no more and no fewer", () => {
    expect([...GROUP_WIDGETS].sort()).toEqual([...groupWidgets].sort());
    expect([...DATASET_WIDGETS].sort()).toEqual([...datasetWidgets].sort());
  });

  it("loads a component for every entry, for a group tile and for a dataset tile", async () => {
    const d: Dataset = { id: "d", title: "D", units: "" };
    const g: Group = { id: "g", title: "G", datasets: [d] };
    const base = { titleOf: (id: string) => id, consoleOpen: false, name: "n" };
    for (const w of WIDGETS) {
      for (const t of [
        { ...base, group: g, datasets: g.datasets, series: [] },
        { ...base, dataset: d, datasets: [d], series: [] },
      ] satisfies TileData[]) {
        const drawing = w.draw(t);
        if (!drawing) continue;
        expect(typeof (await drawing.load()), w.kind).toBe("function");
        expect(drawing.load(), "loaded once").toBe(drawing.load());
      }
    }
  }, 30000);
});

describe("a tile of a kind this version does not know", () => {
  const future = { id: "h", title: "Holo", widget: "hologram", datasets: [{ id: "x", title: "X", units: "" }] } as unknown as Group;

  it("keeps its kind (neither a data grid nor a stand-in) and a default size", () => {
    expect(groupKind(future)).toBe("hologram");
    expect(widgetFor("hologram")).toBeUndefined();
    expect(standsInFor(future)).toBeNull();
    expect(sizeOf("hologram")).toEqual(sizeOf("plot"));
    expect(autoTiles({ title: "p", groups: [future] })).toHaveLength(2);
    expect(resolveTiles({ id: "w", title: "W", tiles: [{ group: "h", x: 0, y: 0, w: 3, h: 3 }] }, { title: "p", groups: [future] })[0].kind).toBe("hologram");
  });

  it("renders the stand-in that names the kind, in English and 简体中文", () => {
    const spec: TileSpec = { key: "w:0", kind: "hologram", title: "Holo", x: 0, y: 0, w: 3, h: 3, group: "h", groupRef: future };
    const before = settings.language;
    try {
      for (const [language, text] of [["en", "is not supported by this version"], ["zh", "不支持"]] as const) {
        settings.language = language;
        const { body } = render(WidgetView, { props: { spec, titleOf: (id: string) => id } });
        expect(body).toContain('data-testid="tile-unsupported"');
        expect(body).toContain("hologram");
        expect(body).toContain(text);
        expect(body).not.toContain("<table");
      }
    } finally {
      settings.language = before;
    }
  });

  it("a known kind does not render the stand-in", () => {
    const spec: TileSpec = { key: "w:0", kind: "datagrid", title: "Env", x: 0, y: 0, w: 3, h: 3, group: "h", groupRef: future };
    const { body } = render(WidgetView, { props: { spec, titleOf: (id: string) => id } });
    expect(body).not.toContain("tile-unsupported");
  });
});
