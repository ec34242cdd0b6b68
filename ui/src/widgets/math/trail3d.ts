/** A 3-D plot's trail: the newest samples of three datasets as points in a unit cube, each
 *  axis fitted to its own range (so a dimension in mV beside one in km still shows), newest
 *  last. Pure, so it is tested without WebGL. */

export interface AxisRange {
  lo: number;
  hi: number;
}

/** The range of `v[off .. off+n)`, ignoring NaN; a flat or empty range is widened so it
 *  never divides by zero. */
export function rangeOf(v: ArrayLike<number>, off: number, n: number): AxisRange {
  let lo = Infinity, hi = -Infinity;
  for (let i = off; i < off + n; i++) {
    const x = v[i];
    if (x < lo) lo = x;
    if (x > hi) hi = x;
  }
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return { lo: -1, hi: 1 };
  if (hi - lo < 1e-12 * Math.max(1, Math.abs(lo))) return { lo: lo - 1, hi: hi + 1 };
  return { lo, hi };
}

/** Writes the newest `n` samples of `x`, `y`, `z` (aligned at their ends, like an XY plot)
 *  into `out` as x,y,z triples in [-1, 1], skipping samples where any axis is NaN; returns
 *  how many points it wrote and the ranges it fitted. `out` must hold 3 × n numbers. */
export function fillTrail(
  x: ArrayLike<number>,
  y: ArrayLike<number>,
  z: ArrayLike<number>,
  n: number,
  out: Float32Array,
): { points: number; ranges: [AxisRange, AxisRange, AxisRange] } {
  const m = Math.max(0, Math.min(n, x.length, y.length, z.length, Math.floor(out.length / 3)));
  const ox = x.length - m, oy = y.length - m, oz = z.length - m;
  const ranges: [AxisRange, AxisRange, AxisRange] = [rangeOf(x, ox, m), rangeOf(y, oy, m), rangeOf(z, oz, m)];
  const fit = (v: number, r: AxisRange) => ((v - r.lo) / (r.hi - r.lo)) * 2 - 1;
  let k = 0;
  for (let i = 0; i < m; i++) {
    const a = x[ox + i], b = y[oy + i], c = z[oz + i];
    if (Number.isNaN(a) || Number.isNaN(b) || Number.isNaN(c)) continue;
    out[3 * k] = fit(a, ranges[0]);
    out[3 * k + 1] = fit(b, ranges[1]);
    out[3 * k + 2] = fit(c, ranges[2]);
    k++;
  }
  return { points: k, ranges };
}

/** The value at the fraction `f` (0–1) of an axis range, for its labels. */
export function along(r: AxisRange, f: number): number {
  return r.lo + (r.hi - r.lo) * f;
}
