/** Colormaps for a waterfall: 256-entry RGB tables for viridis, inferno, turbo and gray, and
 *  the dB range a waterfall colours between. Pure, so it is tested without a page.
 *
 *  The colours are d3-scale-chromatic's: viridis and inferno are matplotlib's own tables,
 *  turbo is Google's polynomial approximation of theirs. */
import { interpolateInferno, interpolateTurbo, interpolateViridis } from "d3-scale-chromatic";

export type ColormapName = "viridis" | "inferno" | "turbo" | "gray";

const INTERPOLATORS: Record<Exclude<ColormapName, "gray">, (t: number) => string> = {
  viridis: interpolateViridis,
  inferno: interpolateInferno,
  turbo: interpolateTurbo,
};

/** An "#rrggbb" or "rgb(r, g, b)" colour as numbers. */
function rgbOf(css: string): [number, number, number] {
  if (css.startsWith("#")) return [1, 3, 5].map((i) => parseInt(css.slice(i, i + 2), 16)) as [number, number, number];
  const m = css.match(/-?\d+(\.\d+)?/g) ?? [];
  return [0, 1, 2].map((i) => Math.round(Number(m[i] ?? 0))) as [number, number, number];
}

const tables = new Map<ColormapName, Uint8ClampedArray>();

/** The colormap as 256 RGB triples (index 0 = lowest power). */
export function colormap(name: ColormapName): Uint8ClampedArray {
  let t = tables.get(name);
  if (t) return t;
  t = new Uint8ClampedArray(256 * 3);
  for (let i = 0; i < 256; i++) t.set(name === "gray" ? [i, i, i] : rgbOf(INTERPOLATORS[name](i / 255)), 3 * i);
  tables.set(name, t);
  return t;
}

/** The dB range a waterfall colours between: the loudest bin seen lately at the top
 *  (rising at once, falling back slowly, so one loud spectrum does not black out the rest
 *  for good), `span` dB below it at the bottom. */
export class DbRange {
  hi = -Infinity;
  constructor(
    readonly span = 80,
    /** How much of the way down to a quieter spectrum's peak the top moves per row. */
    readonly fall = 0.02,
  ) {}

  /** Takes a row's loudest bin; returns [lo, hi]. */
  update(rowMax: number): [number, number] {
    if (Number.isFinite(rowMax)) {
      if (!Number.isFinite(this.hi) || rowMax > this.hi) this.hi = rowMax;
      else this.hi += (rowMax - this.hi) * this.fall;
    }
    const hi = Number.isFinite(this.hi) ? this.hi : 0;
    return [hi - this.span, hi];
  }
}

/** The colormap index (0–255) of `db` between `lo` and `hi`. */
export function level(db: number, lo: number, hi: number): number {
  if (!Number.isFinite(db)) return 0;
  const f = (db - lo) / (hi - lo);
  return f <= 0 ? 0 : f >= 1 ? 255 : Math.round(f * 255);
}

/** Writes one waterfall row: `bins` dB values resampled onto `width` pixels (each pixel
 *  the loudest bin it covers, so a narrow peak is never lost), as RGBA into `out`. */
export function paintRow(db: ArrayLike<number>, from: number, bins: number, lo: number, hi: number, table: Uint8ClampedArray, out: Uint8ClampedArray, width: number) {
  const n = Math.max(0, bins - from);
  for (let x = 0; x < width; x++) {
    const a = from + Math.floor((x * n) / width);
    const b = Math.max(a + 1, from + Math.floor(((x + 1) * n) / width));
    let m = -Infinity;
    for (let i = a; i < b && i < bins; i++) if (db[i] > m) m = db[i];
    const k = 3 * level(m, lo, hi);
    out[4 * x] = table[k];
    out[4 * x + 1] = table[k + 1];
    out[4 * x + 2] = table[k + 2];
    out[4 * x + 3] = 255;
  }
}
