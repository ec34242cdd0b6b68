/** Axis tick labels and label placement, shared by every widget that draws an axis (uPlot
 *  charts through `widgets/axes.ts`, canvas charts and the map directly). Pure. */
import { MINUS, formatValue } from "./scale";

/** Decimals needed to write multiples of `step` exactly (0.25 → 2, 5 → 0, 1e-4 → 4). */
export function stepDecimals(step: number): number {
  if (!(step > 0) || !Number.isFinite(step)) return 0;
  for (let d = 0; d <= 12; d++) {
    const x = step * 10 ** d;
    if (Math.abs(x - Math.round(x)) <= 1e-9 * Math.max(1, x)) return d;
  }
  return 12;
}

/** One tick label: as many decimals as the step needs, the sign of a negative value kept (as
 *  `MINUS`), float noise around zero ("−0.00") written "0", exponent for huge/tiny steps.
 *  `suffix` (a unit such as "°") goes right after the number. */
export function formatTick(v: number, step: number, suffix = ""): string {
  if (!Number.isFinite(v)) return formatValue(v);
  const s = Math.abs(step);
  if (s > 0 && Math.abs(v) < s * 1e-6) v = 0;
  const a = Math.abs(v);
  let out: string;
  if (a !== 0 && (a >= 1e7 || (s > 0 && s < 1e-6) || (!(s > 0) && a < 1e-3))) out = v.toExponential(2).replace(/-/g, MINUS);
  else {
    const body = a.toFixed(s > 0 ? stepDecimals(s) : 3);
    const trimmed = s > 0 ? body : body.includes(".") ? body.replace(/\.?0+$/, "") : body;
    out = v < 0 && /[1-9]/.test(trimmed) ? MINUS + trimmed : trimmed;
  }
  return out + suffix;
}

/** The labels of an axis's ticks (`splits`, `step` apart: uPlot's `foundIncr`). */
export function tickLabels(splits: readonly number[], step?: number, suffix = ""): string[] {
  let st = step ?? NaN;
  if (!(st > 0) && splits.length > 1) st = Math.abs(splits[1] - splits[0]);
  return splits.map((v) => formatTick(v, st, suffix));
}

/** Width (px) a vertical axis needs so no tick label is cut at the plot's edge: the widest
 *  label, the tick and the gap uPlot puts between them, some room, and the axis title. */
export function axisWidth(labels: readonly string[], measure: (s: string) => number, o: { tick?: number; gap?: number; title?: number; pad?: number } = {}): number {
  let widest = 0;
  for (const l of labels) widest = Math.max(widest, measure(l));
  return Math.ceil(widest + (o.tick ?? 10) + (o.gap ?? 5) + (o.pad ?? 4) + (o.title ?? 0));
}

export interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

export const intersects = (a: Box, b: Box, margin = 0) =>
  a.x < b.x + b.w + margin && b.x < a.x + a.w + margin && a.y < b.y + b.h + margin && b.y < a.y + a.h + margin;

/** Which of an axis's labels to draw, in order: one whose box runs into a reserved box (a
 *  scale bar, a readout), into a label kept before it or off the `bounds` is dropped, so
 *  nothing drawn on a chart overlaps. Returns the indices kept. */
export function placeLabels(labels: readonly Box[], reserved: readonly Box[], bounds?: Box, margin = 2): number[] {
  const kept: number[] = [];
  for (let i = 0; i < labels.length; i++) {
    const b = labels[i];
    if (bounds && (b.x < bounds.x || b.y < bounds.y || b.x + b.w > bounds.x + bounds.w || b.y + b.h > bounds.y + bounds.h)) continue;
    if (reserved.some((r) => intersects(b, r, margin))) continue;
    if (kept.some((k) => intersects(b, labels[k], margin))) continue;
    kept.push(i);
  }
  return kept;
}
