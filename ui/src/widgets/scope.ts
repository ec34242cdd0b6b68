/** A plot's oscilloscope settings, the pure part: where a trigger's edge is, which window a
 *  triggered plot shows in each mode, the extremes a peak hold keeps, and the y range and
 *  values of a log axis. `Plot.svelte` draws what these say. */

export type Edge = "rising" | "falling";
export type TriggerMode = "auto" | "normal" | "single";

export interface TriggerSettings {
  /** The dataset whose edge triggers; the plotted one when absent. */
  dataset?: string | null;
  edge?: Edge;
  level: number;
  /** Share of the window before the edge, 0–1. */
  preTrigger?: number;
  mode?: TriggerMode;
}

/** The time at which `v` (sampled at `t`) last crosses `level` the way `edge` says, between
 *  `earliest` and `latest` (both included), interpolated between the two samples around the
 *  crossing; NaN when it does not. A sample exactly at the level counts as past it, so a
 *  signal resting on the level is one crossing, not one per sample. NaN samples break the
 *  signal: no crossing is found across them. */
export function findEdge(
  t: ArrayLike<number>,
  v: ArrayLike<number>,
  level: number,
  edge: Edge,
  earliest: number,
  latest: number,
): number {
  const n = Math.min(t.length, v.length);
  for (let i = n - 1; i > 0; i--) {
    const t1 = t[i];
    if (t1 < earliest) break;
    const a = v[i - 1], b = v[i];
    if (!Number.isFinite(a) || !Number.isFinite(b)) continue;
    const crossed = edge === "rising" ? a < level && b >= level : a > level && b <= level;
    if (!crossed) continue;
    const t0 = t[i - 1];
    const at = b === a ? t1 : t0 + ((level - a) / (b - a)) * (t1 - t0);
    if (at <= latest && at >= earliest) return at;
  }
  return NaN;
}

/** What a triggered plot shows this frame. */
export interface TriggerView {
  /** `rolling`: no edge yet (auto: live data); `waiting`: normal or single with no edge yet;
   *  `triggered`: a window held on an edge; `armed`: single, held on its last edge (or
   *  none) until the next one. */
  state: "rolling" | "waiting" | "triggered" | "armed";
  /** The window shown, when held on an edge. */
  window: [number, number] | null;
  /** The edge it is held on (NaN when none). */
  at: number;
}

/** Decides, frame by frame, which window a triggered plot shows. The window is `span`
 *  seconds wide with `preTrigger` of it before the edge; an edge counts only when the data
 *  reaches the window's end, so a held window is always full. A new edge (later than the
 *  last one) moves the window – in single mode only once after `arm()`. In auto mode, no
 *  edge for a whole span lets the plot roll live again; normal and single keep the last
 *  window. */
export class TriggerState {
  private at = NaN;
  private armedFrom = -Infinity;
  private armed = true;
  private lastSeen = NaN;

  /** Single mode: hold the first edge after `now` (data time). */
  arm(now: number) {
    this.armed = true;
    this.armedFrom = now;
  }

  /** Forget every edge (the settings changed). */
  reset() {
    this.at = NaN;
    this.armed = true;
    this.armedFrom = -Infinity;
    this.lastSeen = NaN;
  }

  /** The trigger's window for this frame: the trigger dataset sampled at `t`/`v`, the data
   *  ending at `now`. Returns the view and whether the held window moved (the caller then
   *  takes a fresh copy of the data in it). */
  update(s: TriggerSettings, t: ArrayLike<number>, v: ArrayLike<number>, now: number, span: number): { view: TriggerView; moved: boolean } {
    const pre = Math.min(1, Math.max(0, s.preTrigger ?? 0.5));
    const mode = s.mode ?? "auto";
    const first = t.length ? t[0] : Infinity;
    // An edge must leave room for the window on both sides within the data.
    const edge = findEdge(t, v, s.level, s.edge ?? "rising", first + pre * span, now - (1 - pre) * span);
    let moved = false;
    const fresh = Number.isFinite(edge) && !(edge <= this.at);
    if (fresh) {
      this.lastSeen = now;
      if (mode !== "single" || (this.armed && edge > this.armedFrom)) {
        this.at = edge;
        moved = true;
        if (mode === "single") this.armed = false;
      }
    }
    const window: [number, number] | null = Number.isFinite(this.at) ? [this.at - pre * span, this.at + (1 - pre) * span] : null;
    let state: TriggerView["state"];
    if (mode === "single") state = this.armed ? (window ? "armed" : "waiting") : "triggered";
    else if (!window) state = mode === "auto" ? "rolling" : "waiting";
    else if (mode === "auto" && !(now - this.lastSeen < span)) state = "rolling";
    else state = "triggered";
    return { view: { state, window: state === "rolling" ? null : window, at: this.at }, moved };
  }
}

/** Copies the samples of `x` (and of each series on it) that fall in `[x0, x1]`, with one
 *  sample either side so the lines reach the window's edges. */
export function sliceWindow(x: Float64Array, ys: Float64Array[], x0: number, x1: number): Float64Array[] {
  let i0 = 0, i1 = x.length;
  while (i0 < x.length && x[i0] < x0) i0++;
  while (i1 > i0 && x[i1 - 1] > x1) i1--;
  i0 = Math.max(0, i0 - 1);
  i1 = Math.min(x.length, i1 + 1);
  return [x.slice(i0, i1), ...ys.map((y) => y.slice(i0, i1))];
}

/** The highest and lowest finite values a series has shown since it was reset. */
export class Peaks {
  lo = Infinity;
  hi = -Infinity;

  /** Takes in the samples of `v` whose `x` is within `[x0, x1]`. */
  add(x: ArrayLike<number>, v: ArrayLike<number>, x0 = -Infinity, x1 = Infinity) {
    const n = Math.min(x.length, v.length);
    for (let i = 0; i < n; i++) {
      const xi = x[i], vi = v[i];
      if (xi < x0 || xi > x1 || !Number.isFinite(vi)) continue;
      if (vi < this.lo) this.lo = vi;
      if (vi > this.hi) this.hi = vi;
    }
  }

  reset() {
    this.lo = Infinity;
    this.hi = -Infinity;
  }

  get any(): boolean {
    return this.lo <= this.hi;
  }
}

/** `v` with every value a log axis cannot show (0, negative, NaN) as NaN, into `out`. */
export function positiveOnly(out: Float64Array, v: ArrayLike<number>): Float64Array {
  const n = Math.min(out.length, v.length);
  for (let i = 0; i < n; i++) out[i] = v[i] > 0 ? v[i] : NaN;
  return out;
}

/** A log axis's range for the positive values of `ys` in `[x0, x1]`: out to the decades
 *  around them (1–10 when there are none), so the axis is labelled in whole powers of ten. */
export function logRange(x: ArrayLike<number>, ys: ArrayLike<number>[], x0 = -Infinity, x1 = Infinity): [number, number] {
  let lo = Infinity, hi = -Infinity;
  for (const y of ys) {
    const n = Math.min(x.length, y.length);
    for (let i = 0; i < n; i++) {
      const xi = x[i], v = y[i];
      if (xi < x0 || xi > x1 || !(v > 0) || !Number.isFinite(v)) continue;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  if (!(lo <= hi)) return [1, 10];
  const a = Math.pow(10, Math.floor(Math.log10(lo)));
  let b = Math.pow(10, Math.ceil(Math.log10(hi)));
  if (b <= a) b = a * 10;
  return [a, b];
}
