// The alarm toast covered the FFT tile's axis: toasts now keep off the tiles, or at worst
// off their axes (placeToasts in dashboard/toasts.svelte.ts).
import { describe, expect, it } from "vitest";
import { AXIS_STRIP, WEIGHT, keepClearOf, placeToasts, type KeepClear, type Rect } from "../src/dashboard/toasts.svelte";

const overlaps = (a: Rect, b: Rect) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

/** A dashboard grid: `rows` × `cols` tiles from (x, y), each w×h with a 22 px header. */
function grid(x: number, y: number, cols: number, rows: number, w: number, h: number, gap = 8): { tiles: Rect[]; keep: KeepClear[] } {
  const tiles: Rect[] = [];
  const keep: KeepClear[] = [];
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++) {
      const tile = { x: x + c * (w + gap), y: y + r * (h + gap), w, h };
      tiles.push(tile);
      // A header with its title, a bar with buttons, the drawing (a canvas) under it.
      keep.push(...keepClearOf(tile, [{ x: tile.x + 8, y: tile.y + 48, w: w - 16, h: h - 56 }], [{ x: tile.x + 8, y: tile.y + 4, w: 80, h: 18 }, { x: tile.x + w - 60, y: tile.y + 26, w: 52, h: 18 }]));
    }
  return { tiles, keep };
}

const axesOf = (keep: KeepClear[]) => keep.filter((k) => k.weight === WEIGHT.axes);
const stack = { w: 300, h: 60 };

describe("placeToasts", () => {
  const pane: Rect = { x: 150, y: 0, w: 1130, h: 800 };

  it("the old fixed bottom-right corner covered the bottom-right tile's axes on a full grid", () => {
    const { keep } = grid(162, 60, 3, 3, 360, 240);
    const old = { x: pane.x + pane.w - 16 - stack.w, y: pane.y + pane.h - 16 - stack.h, ...stack };
    expect(axesOf(keep).some((k) => overlaps(old, k))).toBe(true);
  });

  it("goes to the bottom-right corner when it is free", () => {
    const { keep } = grid(162, 60, 2, 1, 360, 240);
    expect(placeToasts(pane, stack, keep)).toEqual({ x: pane.x + pane.w - 16 - stack.w, y: pane.y + pane.h - 16 - stack.h, cost: 0 });
  });

  it("finds free space beside or below the tiles rather than covering one", () => {
    // Tiles fill the bottom-right corner but leave room on the right of the top row.
    const a = grid(162, 60, 2, 1, 360, 240), b = grid(162, 308, 3, 2, 360, 240);
    const keep = [...a.keep, ...b.keep];
    const spot = placeToasts(pane, stack, keep);
    expect(spot.cost).toBe(0);
    const r = { ...spot, ...stack };
    for (const t of [...a.tiles, ...b.tiles]) expect(overlaps(r, t)).toBe(false);
  });

  it("on a full pane, covers the inside of a plot, never an axis strip, a tile's buttons or a control", () => {
    const { keep } = grid(162, 60, 3, 3, 360, 240);
    const toolbar: KeepClear = { x: 162, y: 8, w: 1100, h: 40, weight: WEIGHT.controls };
    const spot = placeToasts(pane, stack, [...keep, toolbar]);
    const r = { ...spot, ...stack };
    for (const k of axesOf(keep)) expect(overlaps(r, k), `axis strip at ${k.x},${k.y}`).toBe(false);
    for (const k of keep.filter((k) => k.weight === WEIGHT.controls)) expect(overlaps(r, k), `control at ${k.x},${k.y}`).toBe(false);
    expect(overlaps(r, toolbar)).toBe(false);
    expect(spot.x).toBeGreaterThanOrEqual(pane.x + 16);
    expect(spot.y + stack.h).toBeLessThanOrEqual(pane.y + pane.h - 16);
  });

  it("prefers a tile's empty space (under a short table) to the inside of a plot", () => {
    const plot = keepClearOf({ x: 170, y: 60, w: 700, h: 350 }, [{ x: 178, y: 108, w: 684, h: 294 }]);
    const table = keepClearOf({ x: 878, y: 60, w: 390, h: 350 }, [], [{ x: 886, y: 84, w: 374, h: 75 }]);
    const spot = placeToasts({ x: 150, y: 52, w: 1130, h: 368 }, stack, [...plot, ...table], 8);
    const r = { ...spot, ...stack };
    expect(overlaps(r, { x: 886, y: 159, w: 374, h: 251 })).toBe(true);
    for (const k of [...plot.slice(1), table[1]]) expect(overlaps(r, k)).toBe(false);
  });

  it("keeps off a drawing's left and bottom strips, where its axis labels are", () => {
    const [tile, body, left, bottom, button] = keepClearOf({ x: 0, y: 0, w: 400, h: 300 }, [{ x: 8, y: 26, w: 384, h: 266 }], [{ x: 300, y: 4, w: 40, h: 18 }]);
    expect(tile.weight).toBeLessThan(body.weight);
    expect(left).toMatchObject({ x: 8, w: AXIS_STRIP.left, h: 266, weight: WEIGHT.axes });
    expect(bottom).toMatchObject({ y: 26 + 266 - AXIS_STRIP.bottom, h: AXIS_STRIP.bottom, w: 384, weight: WEIGHT.axes });
    expect(button.weight).toBe(WEIGHT.controls);
  });

  it("stays inside a pane too small for it", () => {
    const spot = placeToasts({ x: 0, y: 0, w: 200, h: 50 }, stack, []);
    expect(spot.x).toBeGreaterThanOrEqual(0);
    expect(spot.y).toBeGreaterThanOrEqual(0);
  });
});
