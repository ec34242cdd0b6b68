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

/** What a y axis remembers between frames: its labels and their width, and how many frames
 *  in a row it could have been narrower. */
interface AxisMemory {
  _size?: number;
  font?: unknown;
  _labels?: string;
  _need?: number;
  _width?: number;
  _narrower?: number;
}

/** Frames a y axis must have been too wide in a row before it narrows (about a second at
 *  60 Hz): a width that changes makes uPlot resize the whole canvas, and labels whose width
 *  flickers (−0.5 / 0.5) would do that every few frames. */
export const NARROW_AFTER = 60;

/** A y axis's width for uPlot's `size` option: measured with the axis's own font, once per
 *  set of labels; it widens at once (a label is never cut) and narrows only after
 *  [`NARROW_AFTER`] frames. */
export function uplotAxisSize(self: uPlot, values: string[] | null, axisIdx: number, cycleNum: number): number {
  const ax = self.axes[axisIdx] as uPlot.Axis & AxisMemory;
  // uPlot asks until the size settles; a size that flips between cycles is kept.
  if (cycleNum > 1 && ax._size) return ax._size;
  const labels = (values ?? []).join("\n");
  if (labels !== ax._labels || ax._need == null) {
    const font = Array.isArray(ax.font) ? String(ax.font[0]) : typeof ax.font === "string" ? ax.font : "12px system-ui";
    const dpr = globalThis.devicePixelRatio || 1;
    self.ctx.font = font; // uPlot scales its fonts by the device pixel ratio
    ax._need = axisWidth(values ?? [], (s) => self.ctx.measureText(s).width / dpr, { tick: TICK, gap: GAP });
    ax._labels = labels;
  }
  return (ax._width = stickyWidth(ax._width, ax._need, ax));
}

/** The width to use given the one in use and the one the labels need (pure, for tests). */
export function stickyWidth(current: number | undefined, need: number, memory: { _narrower?: number }): number {
  if (current == null || need >= current) {
    memory._narrower = 0;
    return need;
  }
  memory._narrower = (memory._narrower ?? 0) + 1;
  if (memory._narrower < NARROW_AFTER) return current;
  memory._narrower = 0;
  return need;
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
