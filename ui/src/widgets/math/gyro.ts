/** Gyroscope readout: a gyroscope measures angular *rates* (how fast the device turns about
 *  each axis, °/s), not angles, so each axis is a bar around zero in its rate unit, not an
 *  attitude indicator. Pure. */
import { MINUS, formatValue } from "./scale";
import { niceFloor } from "./gps";

/** A unit of angular rate: per second ("°/s", "deg/s", "rad/s"), "dps" or "rps". */
const RATE = /\/\s*s(ec)?$|^(dps|rps)$|per\s*s(ec(ond)?)?$/i;

/** Whether a gyroscope's datasets hold rates: any of them in a rate unit. Angles ("°",
 *  "deg", "rad") or no units are an attitude, as Serial Studio's examples send it. */
export function isRate(units: readonly (string | null | undefined)[]): boolean {
  return units.some((u) => RATE.test((u ?? "").trim()));
}

/** The unit of the rates: the dataset's own ("rad/s", "dps"), else degrees per second. */
export function rateUnit(units: string | null | undefined): string {
  const u = (units ?? "").trim();
  return RATE.test(u) ? u : "°/s";
}

/** A rate with its sign always shown (+ or −) and its unit: "−12.5 °/s". */
export function rateText(v: number, unit: string): string {
  if (!Number.isFinite(v)) return `— ${unit}`;
  const s = formatValue(v, 1);
  return `${v > 0 && s !== "0" ? "+" : ""}${s} ${unit}`;
}

/** The smallest 1/2/5 × 10^n at or above x (x > 0). */
export function niceCeil(x: number): number {
  if (!(x > 0) || !Number.isFinite(x)) return 0;
  const f = niceFloor(x);
  if (f >= x) return f;
  const m = f / 10 ** Math.floor(Math.log10(f));
  return m === 1 ? 2 * f : m === 2 ? 2.5 * f : 2 * f;
}

/** Full scale of the bars: the datasets' |min|/|max| when set, else a nice value above the
 *  recent peak rate (at least `floor`, 10 °/s). */
export function rateFullScale(ranges: readonly { min?: number | null; max?: number | null }[], peak: number, floor = 10): number {
  let set = 0;
  for (const r of ranges) set = Math.max(set, Math.abs(r.min ?? 0), Math.abs(r.max ?? 0));
  if (set > 0 && Number.isFinite(set)) return set;
  return niceCeil(Math.max(floor, Number.isFinite(peak) ? Math.abs(peak) : 0));
}

/** Where a rate's bar ends, as a share of the half bar: −1 (full scale one way) … 1. */
export function rateFraction(v: number, fullScale: number): number {
  if (!Number.isFinite(v) || !(fullScale > 0)) return 0;
  return Math.max(-1, Math.min(1, v / fullScale));
}

/** The scale under a bar: −fs, 0, +fs in the unit. */
export function rateScaleLabels(fullScale: number): [string, string, string] {
  const s = formatValue(fullScale, 1);
  return [`${MINUS}${s}`, "0", `+${s}`];
}
