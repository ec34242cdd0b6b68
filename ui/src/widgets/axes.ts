/** uPlot axes for every chart widget (Plot, Fft): tick labels from `math/ticks.ts` (the sign of
 *  negative values kept, as a real minus) and a y axis as wide as its widest label, so a
 *  label such as "−237.5" is never cut at the chart's left edge. An axis can carry a title
 *  (its unit, e.g. "Hz", "dB"). */
import type uPlot from "uplot";
import type { Palette } from "./theme.svelte";
import { axisWidth, tickLabels } from "./math/ticks";

const TICK = 10;
const GAP = 5;
/** Room uPlot gives an axis title (the `labelSize` option). */
export const TITLE_SIZE = 18;
const TITLE_FONT = "11px system-ui, sans-serif";

/** Tick labels for uPlot's `values` option: the step is uPlot's `foundIncr`. */
export function uplotValues(suffix = "") {
  return (_u: uPlot, splits: number[], _axisIdx: number, _space: number, incr: number) => tickLabels(splits, incr, suffix);
}

/** A y axis's width for uPlot's `size` option: measured with the axis's own font. */
export function uplotAxisSize(self: uPlot, values: string[] | null, axisIdx: number, cycleNum: number): number {
  const ax = self.axes[axisIdx] as uPlot.Axis & { _size?: number; font?: unknown };
  // uPlot asks until the size settles; a size that flips between cycles is kept.
  if (cycleNum > 1 && ax._size) return ax._size;
  const font = Array.isArray(ax.font) ? String(ax.font[0]) : typeof ax.font === "string" ? ax.font : "12px system-ui";
  const dpr = globalThis.devicePixelRatio || 1;
  self.ctx.font = font; // uPlot scales its fonts by the device pixel ratio
  return axisWidth(values ?? [], (s) => self.ctx.measureText(s).width / dpr, { tick: TICK, gap: GAP });
}

/** Options of a chart's x (bottom) and y (left) axes in the theme's colours, `titles` being
 *  the text under the x axis and beside the y axis (units), if any. */
export function chartAxes(p: Palette, titles: { x?: string; y?: string } = {}, y: Partial<uPlot.Axis> = {}): uPlot.Axis[] {
  const base: uPlot.Axis = {
    stroke: p.muted,
    grid: { stroke: p.grid, width: 1 },
    ticks: { stroke: p.grid, width: 1, size: TICK },
    gap: GAP,
    values: uplotValues(),
  };
  const title = (t: string | undefined): Partial<uPlot.Axis> =>
    t ? { label: t, labelSize: TITLE_SIZE, labelFont: TITLE_FONT, labelGap: 0 } : {};
  return [
    { ...base, size: 40, ...title(titles.x) },
    { ...base, size: uplotAxisSize, ...title(titles.y), ...y },
  ];
}
