import { describe, expect, it } from "vitest";
import { COLS, MIN_TILE_PX, autoTiles, columnsFor, reflow, settle, datasetViews, groupKind, moveTile, plainTile, resizeTile, resolveTiles, standsInFor, workspacesOf } from "../src/dashboard/layout";
import type { Tile } from "../src/lib/model";
import type { Dataset, Project } from "../src/lib/model";
import { strings as typed } from "../src/dashboard/strings";

// Looked up by any string: these checks are about what exists at run time.
const strings: Record<"en" | "zh", Record<string, string>> = typed;

const ds = (id: string, extra: Partial<Dataset> = {}): Dataset => ({ id, title: id.toUpperCase(), units: "", ...extra });
const project: Project = {
  title: "p",
  groups: [
    { id: "g1", title: "Env", widget: "dataGrid", datasets: [ds("t", { widget: "gauge", fft: true }), ds("p", { graph: false, led: true })] },
    { id: "g2", title: "Plain", widget: "none", datasets: [ds("q", { graph: false })] },
    { id: "g3", title: "Nav", widget: "gps", datasets: [ds("lat", { role: "lat", graph: false }), ds("lon", { role: "lon", graph: false })] },
  ],
};

describe("dashboard layout", () => {
  it("lists a dataset's views in a fixed order; graph defaults to on", () => {
    expect(datasetViews(ds("a"))).toEqual(["plot"]);
    expect(datasetViews(ds("a", { widget: "meter", fft: true, led: true }))).toEqual(["meter", "plot", "fft", "led"]);
    expect(datasetViews(ds("a", { fft: true, waterfall: { colormap: "turbo", history: 64 } }))).toEqual(["plot", "fft", "waterfall"]);
    expect(datasetViews(ds("a", { graph: false }))).toEqual([]);
  });

  it("maps group widgets to tile kinds with a data grid fallback", () => {
    expect(groupKind({ id: "", title: "", widget: "multiPlot", datasets: [] })).toBe("multiplot");
    expect(groupKind({ id: "", title: "", widget: "ledPanel", datasets: [] })).toBe("led");
    expect(groupKind({ id: "", title: "", widget: "webView", datasets: [] })).toBe("datagrid");
    for (const [widget, kind] of [["painter", "painter"], ["image", "image"], ["plot3d", "plot3d"], ["output", "controls"]] as const)
      expect(groupKind({ id: "", title: "", widget, datasets: [] })).toBe(kind);
    expect(groupKind({ id: "", title: "", datasets: [] })).toBe("datagrid");
  });

  it("auto layout: a tile per group widget and per dataset view, packed without overlap", () => {
    const tiles = autoTiles(project);
    const ws = { id: "", title: "Auto", tiles };
    const specs = resolveTiles(ws, project);
    expect(specs.map((s) => `${s.kind}:${s.title}`)).toEqual(["datagrid:Env", "gps:Nav", "gauge:T", "plot:T", "fft:T", "led:P"]);
    for (const t of tiles) expect(t.x + t.w).toBeLessThanOrEqual(COLS);
    for (let i = 0; i < tiles.length; i++)
      for (let j = i + 1; j < tiles.length; j++) {
        const a = tiles[i], b = tiles[j];
        const overlap = a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
        expect(overlap, `${i} overlaps ${j}`).toBe(false);
      }
  });

  it("the n-th tile of a dataset shows its n-th view, so layouts survive a save", () => {
    const saved = autoTiles(project).map(plainTile);
    for (const t of saved) expect(Object.keys(t).sort()).toEqual(expect.arrayContaining(["x", "y", "w", "h"]));
    const specs = resolveTiles({ id: "w", title: "W", tiles: saved }, project);
    expect(specs.filter((s) => s.dataset === "t").map((s) => s.kind)).toEqual(["gauge", "plot", "fft"]);
  });

  it("drops tiles naming unknown groups or datasets and clamps bad geometry", () => {
    const specs = resolveTiles({ id: "w", title: "W", tiles: [{ group: "nope", x: 0, y: 0, w: 2, h: 2 }, { dataset: "t", x: 50, y: 0, w: 40, h: 0 }] }, project);
    expect(specs).toHaveLength(1);
    expect(specs[0]).toMatchObject({ x: 0, w: COLS, h: 3, key: "w:1" });
  });

  it("uses the project's workspaces, or one automatic one", () => {
    expect(workspacesOf(project, "Auto")).toEqual([{ id: "", title: "Auto", tiles: autoTiles(project) }]);
    const withWs = { ...project, workspaces: [{ id: "ws-1", title: "Mine", tiles: [] }] };
    expect(workspacesOf(withWs, "Auto").map((w) => w.id)).toEqual(["ws-1"]);
  });

  it("moves and resizes in whole cells, staying on the grid", () => {
    const t = { dataset: "t", x: 2, y: 1, w: 4, h: 3 };
    expect(moveTile(t, 3, -1)).toMatchObject({ x: 5, y: 0 });
    expect(moveTile(t, 20, -5)).toMatchObject({ x: COLS - 4, y: 0 });
    expect(moveTile(t, -9, 0)).toMatchObject({ x: 0 });
    expect(resizeTile(t, 100, -10)).toMatchObject({ w: COLS - 2, h: 1 });
    expect(plainTile({ ...t, group: null } as never)).toEqual({ dataset: "t", x: 2, y: 1, w: 4, h: 3 });
  });
});

describe("dashboard strings", () => {
  it("English and Chinese have the same keys, none empty", () => {
    expect(Object.keys(strings.zh).sort()).toEqual(Object.keys(strings.en).sort());
    for (const [k, v] of [...Object.entries(strings.en), ...Object.entries(strings.zh)]) expect(v.trim(), k).not.toBe("");
  });
  it("placeholders match between languages", () => {
    const vars = (s: string) => (s.match(/\{\w+\}/g) ?? []).sort().join();
    for (const k of Object.keys(strings.en)) expect(vars(strings.zh[k]), k).toBe(vars(strings.en[k]));
  });
});

describe("settle", () => {
  it("pushes overlapped tiles below the moved one, cascading, and leaves others alone", () => {
    const tiles = [
      { group: "a", x: 1, y: 0, w: 4, h: 4 }, // moved onto b
      { group: "b", x: 4, y: 0, w: 8, h: 4 },
      { group: "c", x: 4, y: 4, w: 4, h: 2 }, // overlapped once b is pushed
      { group: "d", x: 0, y: 20, w: 2, h: 2 },
    ];
    const out = settle(tiles, 0);
    expect(out[0]).toEqual(tiles[0]);
    expect(out[1].y).toBe(4);
    expect(out[2].y).toBe(8);
    expect(out[3]).toEqual(tiles[3]);
    for (let i = 0; i < out.length; i++)
      for (let j = i + 1; j < out.length; j++) {
        const a = out[i], b = out[j];
        expect(a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h, `${i}/${j}`).toBe(false);
      }
    expect(tiles[1].y).toBe(0); // input untouched
  });
});

describe("tile views", () => {
  const project: any = {
    groups: [{ id: "g", title: "G", widget: "none", datasets: [{ id: "v", title: "Vibration", widget: "gauge", graph: true, fft: true }] }],
  };
  it("a tile naming a view shows that view, whatever its position", () => {
    const ws: any = { id: "w", title: "W", tiles: [{ dataset: "v", view: "fft", x: 0, y: 0, w: 3, h: 3 }, { dataset: "v", view: "widget", x: 3, y: 0, w: 3, h: 3 }] };
    expect(resolveTiles(ws, project).map((t) => t.kind)).toEqual(["fft", "gauge"]);
  });
  it("tiles without a view keep the n-th view rule", () => {
    const ws: any = { id: "w", title: "W", tiles: [{ dataset: "v", x: 0, y: 0, w: 3, h: 3 }, { dataset: "v", x: 3, y: 0, w: 3, h: 3 }] };
    expect(resolveTiles(ws, project).map((t) => t.kind)).toEqual(["gauge", "plot"]);
  });
  it("the automatic layout names each view and keeps it when saved", () => {
    const tiles = autoTiles(project);
    expect(tiles.map((t) => t.view)).toEqual(["widget", "plot", "fft"]);
    expect(tiles.map((t) => plainTile(t).view)).toEqual(["widget", "plot", "fft"]);
    const ws: any = { id: "w", title: "W", tiles: tiles.reverse() };
    expect(resolveTiles(ws, project).map((t) => t.kind)).toEqual(["fft", "plot", "gauge"]);
  });
});

describe("reflow for narrow grids", () => {
  // A multiplot and a data grid side by side, then two gauges and a plot.
  const layout: Tile[] = [
    { group: "power", x: 0, y: 0, w: 8, h: 4 },
    { group: "env", x: 8, y: 0, w: 4, h: 4 },
    { dataset: "t", x: 0, y: 4, w: 3, h: 3 },
    { dataset: "v", x: 3, y: 4, w: 3, h: 3 },
    { dataset: "vib", x: 6, y: 4, w: 6, h: 3 },
  ];
  const GAP = 8;
  /** A tile's drawn width (px) in a grid `width` px wide. */
  const px = (t: Tile, width: number) => (t.w * (width - GAP * (COLS - 1))) / COLS + GAP * (t.w - 1);
  const overlap = (a: Tile, b: Tile) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

  it("keeps the layout where every tile is wide enough", () => {
    expect(columnsFor(layout, 1100, GAP)).toBe(COLS);
    expect(columnsFor(layout, 840, GAP)).toBe(COLS); // a 3-wide gauge is 204 px there
    expect(reflow(layout, COLS)).toEqual(layout);
  });

  it("uses fewer columns as the available width shrinks, none narrower than the minimum", () => {
    for (const [width, cols] of [[700, 3], [500, 2], [300, 1], [120, 1]] as const) {
      expect(columnsFor(layout, width, GAP), `${width} px`).toBe(cols);
      const tiles = reflow(layout, cols);
      for (const t of tiles) {
        if (width >= MIN_TILE_PX) expect(px(t, width), `${width} px: ${JSON.stringify(t)}`).toBeGreaterThanOrEqual(MIN_TILE_PX);
        expect(t.x + t.w).toBeLessThanOrEqual(COLS);
      }
      for (let i = 0; i < tiles.length; i++) for (let j = i + 1; j < tiles.length; j++) expect(overlap(tiles[i], tiles[j]), `${width} px: ${i} and ${j}`).toBe(false);
    }
  });

  it("packs in reading order, keeping each tile's place in the list and its height", () => {
    expect(reflow(layout, 2).map(({ x, y, w, h }) => [x, y, w, h])).toEqual([
      [0, 0, 6, 4], [6, 0, 6, 4], [0, 4, 6, 3], [6, 4, 6, 3], [0, 7, 6, 3],
    ]);
    expect(reflow(layout, 1).map(({ x, y, w }) => [x, y, w])).toEqual([[0, 0, 12], [0, 4, 12], [0, 8, 12], [0, 11, 12], [0, 14, 12]]);
    // Reading order is by row, then column, whatever the list order.
    const shuffled = [layout[4], layout[0], layout[2]];
    expect(reflow(shuffled, 1).map((t) => t.y)).toEqual([7, 0, 4]);
    expect(reflow(layout, 2)[0].group).toBe("power");
  });
});

describe("tiles that stand in for a widget the web UI lacks", () => {
  it("name what they stand in for, and every such widget has its explanation in both languages", () => {
    const g = (widget: string) => ({ id: "g", title: "G", widget, datasets: [] }) as never;
    expect(["webView"].map((w) => standsInFor(g(w)))).toEqual(["webView"]);
    expect(["multiPlot", "gps", "dataGrid", "none", "painter", "image", "plot3d", "output"].map((w) => standsInFor(g(w)))).toEqual([null, null, null, null, null, null, null, null]);
    for (const w of ["webView"]) {
      expect(strings.en[`dash.standIn.${w}`]).toBeTruthy();
      expect(strings.zh[`dash.standIn.${w}`]).toBeTruthy();
    }
  });
});
