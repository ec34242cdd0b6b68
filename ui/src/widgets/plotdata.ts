/** Lines up several datasets' windows on one x axis for uPlot without copying when they
 *  already share sample times (the usual case: one source feeds them all), and otherwise
 *  resamples into buffers that are reused between draws. Also finds y ranges, scales each
 *  series to its own range (the normalised view) and says what a legend entry reads. Pure. */

export class Aligner {
  private bufs: Float64Array[] = [];

  /** `v` sampled at `t` re-expressed on `x` (linear interpolation, NaN outside). Returns the
   *  input itself when `t` and `x` are the same times. */
  align(slot: number, x: Float64Array, t: Float64Array | undefined, v: Float64Array | undefined): Float64Array {
    const n = x.length;
    if (t && v && t.length === n && v.length === n && (n === 0 || (t[0] === x[0] && t[n - 1] === x[n - 1]))) return v;
    let out = this.bufs[slot];
    if (!out || out.length !== n) out = this.bufs[slot] = new Float64Array(n);
    if (!t || !v || t.length === 0) {
      out.fill(NaN);
      return out;
    }
    let j = 0;
    const m = Math.min(t.length, v.length);
    for (let i = 0; i < n; i++) {
      const xi = x[i];
      while (j < m - 1 && t[j + 1] < xi) j++;
      if (xi < t[0] || xi > t[m - 1]) out[i] = NaN;
      else if (j >= m - 1 || t[j + 1] === t[j]) out[i] = v[j];
      else {
        const a = (xi - t[j]) / (t[j + 1] - t[j]);
        out[i] = a <= 0 ? v[j] : v[j] + a * (v[j + 1] - v[j]);
      }
    }
    return out;
  }
}

/** Finite min/max over ys[from..], optionally only where x is within [x0, x1]. */
export function yRange(x: ArrayLike<number>, ys: ArrayLike<number>[], x0 = -Infinity, x1 = Infinity, from = 0): [number, number] | null {
  let lo = Infinity, hi = -Infinity;
  for (let k = from; k < ys.length; k++) {
    const y = ys[k];
    const n = Math.min(x.length, y.length);
    for (let i = 0; i < n; i++) {
      const xi = x[i];
      if (xi < x0 || xi > x1) continue;
      const v = y[i];
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return null;
  return padRange(lo, hi);
}

/** A range with 5 % headroom; a flat line gets ±1 (or ±10 % of its value). */
export function padRange(lo: number, hi: number): [number, number] {
  if (lo === hi) {
    const d = Math.abs(lo) * 0.1 || 1;
    return [lo - d, hi + d];
  }
  const pad = (hi - lo) * 0.05;
  return [lo - pad, hi + pad];
}

/** 0, 1, 2 … n-1 in a reused buffer (sample-axis plots). */
export class Counter {
  private buf = new Float64Array(0);
  get(n: number): Float64Array {
    if (this.buf.length < n) {
      this.buf = new Float64Array(Math.max(n, this.buf.length * 2));
      for (let i = 0; i < this.buf.length; i++) this.buf[i] = i;
    }
    return this.buf.length === n ? this.buf : this.buf.subarray(0, n);
  }
}

/** `v` scaled so its own visible range (`yRange` of it, padded) spans 0…1, into `out`
 *  (reused when its length fits): a 400 m altitude and a ±1 g acceleration both fill the
 *  plot's height. A flat series sits at 0.5; NaN stays NaN. Returns the range used, or
 *  null when the window holds no finite value. */
export function normalise(
  out: Float64Array,
  x: ArrayLike<number>,
  v: ArrayLike<number>,
  x0 = -Infinity,
  x1 = Infinity,
): [number, number] | null {
  const r = yRange(x, [v], x0, x1);
  const n = Math.min(out.length, v.length);
  if (!r) {
    out.fill(NaN, 0, n);
    return null;
  }
  const [lo, hi] = r;
  const span = hi - lo;
  for (let i = 0; i < n; i++) out[i] = span > 0 ? (v[i] - lo) / span : 0.5;
  return r;
}

/** What a legend entry reads. Under the cursor: the series' own value at the cursor's
 *  sample. Off the plot: its latest value – the window drawn can end before it (a series
 *  decimated or resampled onto another's times has nothing at the last one), which read
 *  as a dash at the live edge. */
export function legendReading(hovering: boolean, raw: ArrayLike<number> | undefined, idx: number | null | undefined, latest: number): number {
  if (!hovering) return latest;
  if (idx == null || !raw || idx < 0 || idx >= raw.length) return NaN;
  return raw[idx];
}

/** The y range to show, given the one shown and the data's own (padded) range: the shown
 *  one is kept while the data fits inside it and fills at least `fill` of its height, so
 *  autoscale follows the signal without re-scaling (and re-labelling) the axis on every
 *  frame as a noisy signal's extremes move. No data keeps what is shown. */
export function stickyRange(shown: [number, number] | null, fit: [number, number] | null, fill = 0.5): [number, number] | null {
  if (!fit) return shown;
  if (!shown) return fit;
  const [a, b] = shown, [lo, hi] = fit;
  return lo >= a && hi <= b && hi - lo >= fill * (b - a) ? shown : fit;
}

/** Window points a plot `widthPx` wide asks the backend for: two per pixel (a bucket's
 *  min and max), rounded up to a multiple of 256 so a resize does not re-subscribe at every
 *  pixel. An unmeasured plot (0) asks for a modest 1024 until it is laid out. */
export function windowPoints(widthPx: number): number {
  const w = Number.isFinite(widthPx) && widthPx > 0 ? widthPx : 512;
  return Math.ceil((2 * w) / 256) * 256;
}
