/** Small vector helpers for the accelerometer. */
export function magnitude(x: number, y: number, z: number): number {
  if (!Number.isFinite(x) || !Number.isFinite(y)) return NaN;
  return Math.hypot(x, y, Number.isFinite(z) ? z : 0);
}
