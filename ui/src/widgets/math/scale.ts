/** Value → position mapping shared by gauges, meters, bars and compasses. Pure; never throws. */

/** Where `value` sits between `min` and `max`, clamped to 0..1; works when min > max
 *  (a reversed scale). NaN for a non-finite value or a degenerate range. */
export function fraction(value: number, min: number, max: number): number {
  if (!Number.isFinite(value) || !Number.isFinite(min) || !Number.isFinite(max) || min === max) return NaN;
  const f = (value - min) / (max - min);
  return f <= 0 ? 0 : f > 1 ? 1 : f; // `<= 0` also turns -0 into 0
}

const DEG = Math.PI / 180;

/** Gauge: a 270° arc opening at the bottom, from 135° to 405° (canvas angles, clockwise). */
export const GAUGE = { startDeg: 135, sweepDeg: 270 } as const;
/** Meter: a half circle over the top, from 180° (left) to 360° (right). */
export const METER = { startDeg: 180, sweepDeg: 180 } as const;

/** Needle angle in radians (canvas convention: 0 = +x, clockwise); NaN when no value. */
export function needleAngle(value: number, min: number, max: number, arc: { startDeg: number; sweepDeg: number }): number {
  const f = fraction(value, min, max);
  return Number.isFinite(f) ? (arc.startDeg + f * arc.sweepDeg) * DEG : NaN;
}

/** Heading in [0, 360); NaN stays NaN. */
export function normalizeHeading(deg: number): number {
  if (!Number.isFinite(deg)) return NaN;
  const r = deg % 360;
  const n = r < 0 ? r + 360 : r;
  return n >= 360 || n === 0 ? 0 : n; // also folds -0 and float round-up to 360
}

const POINTS = ["N", "NE", "E", "SE", "S", "SW", "W", "NW"] as const;
export type Cardinal = (typeof POINTS)[number];

/** The nearest of the 8 compass points; null for no value. */
export function cardinal(deg: number): Cardinal | null {
  const h = normalizeHeading(deg);
  if (Number.isNaN(h)) return null;
  return POINTS[Math.round(h / 45) % 8];
}

/** The range a widget uses: the dataset's min/max when set, else a fallback. */
export function rangeOf(min: number | null | undefined, max: number | null | undefined, fallback: [number, number] = [0, 100]): [number, number] {
  const lo = min ?? fallback[0];
  const hi = max ?? fallback[1];
  return Number.isFinite(lo) && Number.isFinite(hi) && lo !== hi ? [lo, hi] : fallback;
}

/** Short number for labels: up to 4 significant decimals, exponent for huge/tiny values. */
export function formatValue(v: number, digits = 3): string {
  if (!Number.isFinite(v)) return Number.isNaN(v) ? "—" : v > 0 ? "∞" : "-∞";
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e7 || a < 1e-3)) return v.toExponential(2);
  const s = v.toFixed(a >= 1000 ? 1 : digits);
  return s.includes(".") ? s.replace(/\.?0+$/, "") : s;
}
