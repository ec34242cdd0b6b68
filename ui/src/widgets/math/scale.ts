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

/** The minus sign of axis tick labels (U+2212, `math/ticks.ts`): a hyphen is a few pixels at
 *  9–10 px and easily lost on an axis. Readouts ([`formatValue`]) keep the ASCII
 *  hyphen-minus, so a value a person copies (a legend, a data grid) parses as a number. */
export const MINUS = "\u2212";

/** Short number for readouts: up to `digits` decimals, exponent for huge/tiny values;
 *  negative values keep their sign, a value that rounds to zero reads "0", never "-0". */
export function formatValue(v: number, digits = 3): string {
  if (!Number.isFinite(v)) return Number.isNaN(v) ? "—" : v > 0 ? "∞" : "-∞";
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e7 || a < 1e-3)) return v.toExponential(2);
  let s = a.toFixed(a >= 1000 ? 1 : digits);
  if (s.includes(".")) s = s.replace(/\.?0+$/, "");
  return v < 0 && s !== "0" ? "-" + s : s;
}

/** A dial's geometry and where its min/max labels go. */
export interface DialLayout {
  cx: number;
  cy: number;
  r: number;
  /** The track's stroke width (round caps: the stroke reaches lineWidth/2 past each end). */
  lineWidth: number;
  /** Centres of the min and max labels (drawn centred, middle baseline). */
  min: { x: number; y: number };
  max: { x: number; y: number };
}

/** Lays a gauge (270° arc) or meter (180°) out in w×h: the min and max labels sit under the
 *  ends of the arc, clear of its stroke and round caps (and of the stroke's outer edge for a
 *  meter, whose ends are level with its centre), the radius shrunk so they stay inside.
 *  `labelPx` is the labels' font size, `labelW` their widest text (px). */
export function dialLayout(w: number, h: number, kind: "gauge" | "meter", labelPx = 10, labelW = 0): DialLayout {
  const meter = kind === "meter";
  const arc = meter ? METER : GAUGE;
  const gap = 3;
  // The labels' height under an end: half the stroke, the gap, the text.
  const below = (r: number) => Math.max(4, r * 0.12) / 2 + gap + labelPx;
  let r: number, cx = w / 2, cy: number;
  if (meter) {
    // Room under the pivot for the value readout (44 px) as before.
    r = Math.max(10, Math.min(w / 2 - 14 - Math.max(0, labelW / 2 - 14), h - 56));
    cy = (h - 44 - r) / 2 + r + 6;
  } else {
    const s = Math.sin((arc.startDeg * Math.PI) / 180); // the ends sit r·s below the centre
    r = Math.max(10, Math.min(w, h) / 2 - 12);
    // Centre + r·s + the labels must fit in h; the top of the arc must too.
    for (let i = 0; i < 20 && r > 10 && r + r * s + below(r) + 4 > h; i++) r = Math.max(10, (h - below(r) - 4) / (1 + s));
    cy = Math.max(r + 2, Math.min(h / 2 + 6, h - r * s - below(r) - 2));
  }
  const lineWidth = Math.max(4, r * 0.12);
  const a0 = (arc.startDeg * Math.PI) / 180, a1 = ((arc.startDeg + arc.sweepDeg) * Math.PI) / 180;
  const dy = lineWidth / 2 + gap + labelPx / 2;
  return {
    cx,
    cy,
    r,
    lineWidth,
    min: { x: cx + Math.cos(a0) * r, y: cy + Math.sin(a0) * r + dy },
    max: { x: cx + Math.cos(a1) * r, y: cy + Math.sin(a1) * r + dy },
  };
}
