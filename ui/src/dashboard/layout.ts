/** Workspace layout: which widget a tile shows, the automatic layout for projects without
 *  workspaces, grid moves/resizes, and the reflow of a layout into fewer columns when the
 *  grid is too narrow for it. Pure, so it is tested without a browser. */
import type { Dataset, Group, Project, Tile, TileView, Workspace } from "../lib/model";
import { kindOfGroupWidget, sizeOf, standInFor, type StandsFor, type WidgetKind } from "../widgets/registry";

export const COLS = 12;

export interface TileSpec extends Tile {
  /** Stable within a workspace: used as the Svelte key. */
  key: string;
  /** A kind of `widgets/registry.ts`, or a widget this version does not know (a project
   *  from a newer one), which the tile says it cannot draw. */
  kind: string;
  title: string;
  groupRef?: Group;
  datasetRef?: Dataset;
}

/** The widget a group tile shows (from `widgets/registry.ts`): a group without a widget
 *  shows a data grid; the registry's stand-ins draw another kind (`standsInFor` says so); a
 *  widget this version does not know keeps its name, and the tile says it cannot draw it. */
export function groupKind(g: Group): string {
  return kindOfGroupWidget(g.widget ?? "none");
}

/** The widget a group asked for that its tile stands in for (the web UI has no such widget
 *  yet), so the tile can say so instead of swapping silently; null when it draws what was
 *  asked. */
export function standsInFor(g: Group): StandsFor | null {
  return standInFor(g.widget);
}

/** Every view a dataset asks for, in a fixed order: its widget, its graph, FFT, waterfall,
 *  LED.
 *  A tile says which one with `view`; an older tile without it shows the n-th view for the
 *  dataset's n-th tile in a workspace. */
export function datasetViews(d: Dataset): WidgetKind[] {
  const out: WidgetKind[] = [];
  if (d.widget && d.widget !== "none") out.push(d.widget);
  if (d.graph ?? true) out.push("plot");
  if (d.fft) out.push("fft");
  if (d.waterfall) out.push("waterfall");
  if (d.led) out.push("led");
  return out;
}

/** Tiles for a project without workspaces: each group with a widget, then each dataset view,
 *  packed row by row into COLS columns. */
export function autoTiles(p: Project): Tile[] {
  const items: { group?: string; dataset?: string; kind: string; view?: TileView }[] = [];
  for (const g of p.groups ?? []) if (g.widget && g.widget !== "none") items.push({ group: g.id, kind: groupKind(g) });
  for (const g of p.groups ?? [])
    for (const d of g.datasets ?? []) for (const kind of datasetViews(d)) items.push({ dataset: d.id, kind, view: viewOf(d, kind) });
  const tiles: Tile[] = [];
  let x = 0, y = 0, rowH = 0;
  for (const it of items) {
    const [w, h] = sizeOf(it.kind);
    if (x + w > COLS) {
      x = 0;
      y += rowH;
      rowH = 0;
    }
    tiles.push({ ...(it.group ? { group: it.group } : { dataset: it.dataset, view: it.view }), x, y, w, h });
    x += w;
    rowH = Math.max(rowH, h);
  }
  return tiles;
}

/** What each tile of a workspace shows; tiles naming unknown groups/datasets are dropped. */
export function resolveTiles(ws: Workspace, p: Project): TileSpec[] {
  const groups = new Map<string, Group>();
  const datasets = new Map<string, Dataset>();
  for (const g of p.groups ?? []) {
    groups.set(g.id, g);
    for (const d of g.datasets ?? []) datasets.set(d.id, d);
  }
  const seen = new Map<string, number>();
  const out: TileSpec[] = [];
  (ws.tiles ?? []).forEach((tile, i) => {
    const w = Math.max(1, Math.min(COLS, tile.w || 3));
    const h = Math.max(1, tile.h || 3);
    const x = Math.max(0, Math.min(COLS - w, tile.x || 0));
    const y = Math.max(0, tile.y || 0);
    const base = { group: tile.group, dataset: tile.dataset, x, y, w, h, key: `${ws.id}:${i}` };
    if (tile.group) {
      const g = groups.get(tile.group);
      if (g) out.push({ ...base, kind: groupKind(g), title: g.title, groupRef: g });
    } else if (tile.dataset) {
      const d = datasets.get(tile.dataset);
      if (!d) return;
      const views = datasetViews(d);
      const n = seen.get(d.id) ?? 0;
      seen.set(d.id, n + 1);
      const named = tile.view ? kindOf(d, tile.view) : null;
      const kind = named ?? (views.length ? views[n % views.length] : "plot");
      out.push({ ...base, kind, title: d.title, datasetRef: d });
    }
  });
  return out;
}

/** The workspaces to show as tabs: the project's, or one automatic workspace (id ""). */
export function workspacesOf(p: Project, autoTitle: string): Workspace[] {
  if (p.workspaces?.length) return p.workspaces;
  return [{ id: "", title: autoTitle, tiles: autoTiles(p) }];
}

/** A tile moved/resized by whole grid cells, kept on the grid. */
export function moveTile(t: Tile, dx: number, dy: number): Tile {
  const w = Math.max(1, Math.min(COLS, t.w));
  return { ...t, x: Math.max(0, Math.min(COLS - w, t.x + dx)), y: Math.max(0, t.y + dy) };
}

export function resizeTile(t: Tile, dw: number, dh: number): Tile {
  return { ...t, w: Math.max(1, Math.min(COLS - t.x, t.w + dw)), h: Math.max(1, t.h + dh) };
}

/** Only the fields the backend's Tile has (specs carry resolved refs). */
export function plainTile(t: Tile): Tile {
  const out: Tile = { x: t.x, y: t.y, w: t.w, h: t.h };
  if (t.group) out.group = t.group;
  if (t.dataset) out.dataset = t.dataset;
  if (t.dataset && t.view) out.view = t.view;
  return out;
}

/** The widget a named view draws for `d`; `widget` without a widget of its own is a plot. */
export function kindOf(d: Dataset, view: TileView): WidgetKind {
  if (view === "widget") return d.widget && d.widget !== "none" ? d.widget : "plot";
  return view;
}

/** The view name of a widget kind drawn for `d` (inverse of kindOf). */
export function viewOf(d: Dataset, kind: WidgetKind): TileView {
  if (kind === "plot" || kind === "fft" || kind === "led" || kind === "waterfall") return kind;
  return d.widget === kind ? "widget" : "plot";
}

const overlaps = (a: Tile, b: Tile) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

/** After tile `fixed` moved or grew, pushes every tile it now overlaps down below it,
 *  cascading, so tiles never cover each other (and their handles stay reachable). */
export function settle(tiles: Tile[], fixed: number): Tile[] {
  const out = tiles.map((t) => ({ ...t }));
  const placed = [fixed];
  const queue = [fixed];
  // Each push moves a tile strictly down, so this ends; the bound is a safety net.
  for (let guard = 0; queue.length && guard < 10000; guard++) {
    const i = queue.shift()!;
    for (let j = 0; j < out.length; j++) {
      if (j === i || !overlaps(out[i], out[j])) continue;
      if (j === fixed) continue;
      out[j].y = out[i].y + out[i].h;
      if (!placed.includes(j)) placed.push(j);
      queue.push(j);
    }
  }
  return out;
}

/** The narrowest a tile is drawn (px): below it titles are cut to a few letters, legends
 *  lose their entries and gauges their numbers. */
export const MIN_TILE_PX = 200;

/** How many columns of whole tiles a grid `width` px wide holds: 12 when every tile of the
 *  layout is at least `minPx` wide as laid out, else the most of 6, 4, 3, 2 or 1 equal
 *  columns (each COLS / n grid columns) that are at least `minPx` wide. */
export function columnsFor(tiles: readonly Tile[], width: number, gap: number, minPx = MIN_TILE_PX): number {
  const px = (cols: number, of: number) => (cols * (width - gap * (of - 1))) / of + gap * (cols - 1);
  if (!(width > 0)) return COLS;
  const narrowest = tiles.reduce((m, t) => Math.min(m, Math.max(1, Math.min(COLS, t.w))), COLS);
  if (px(narrowest, COLS) >= minPx) return COLS;
  for (const n of [6, 4, 3, 2]) if (px(1, n) >= minPx) return n;
  return 1;
}

/** The tiles as drawn in a grid of `columns` (columnsFor): unchanged at COLS; otherwise
 *  each tile spans a whole number of the wider columns (its width rounded to them, at
 *  least one), packed row by row in reading order, heights kept. A view of the layout for
 *  a narrow window – the workspace's own layout is not edited. */
export function reflow<T extends Tile>(tiles: readonly T[], columns: number): T[] {
  if (columns >= COLS) return tiles.slice();
  const unit = COLS / columns;
  const order = tiles.map((t, i) => ({ t, i })).sort((a, b) => a.t.y - b.t.y || a.t.x - b.t.x || a.i - b.i);
  const out: T[] = new Array(tiles.length);
  let x = 0, y = 0, rowH = 0;
  for (const { t, i } of order) {
    const span = Math.max(1, Math.min(columns, Math.round(Math.max(1, t.w) / unit)));
    if (x + span > columns) {
      x = 0;
      y += rowH;
      rowH = 0;
    }
    const h = Math.max(1, t.h);
    out[i] = { ...t, x: x * unit, y, w: span * unit, h };
    x += span;
    rowH = Math.max(rowH, h);
  }
  return out;
}
