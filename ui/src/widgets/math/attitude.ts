/** Attitude indicator geometry: where the horizon line goes for a pitch and roll. Pure. */

const DEG = Math.PI / 180;

/** Roll wrapped to (-180, 180], pitch clamped to [-90, 90]; NaN becomes 0 (level). */
export function normalizeAttitude(pitchDeg: number, rollDeg: number): { pitch: number; roll: number } {
  const pitch = Number.isFinite(pitchDeg) ? Math.max(-90, Math.min(90, pitchDeg)) : 0;
  let roll = Number.isFinite(rollDeg) ? rollDeg % 360 : 0;
  if (roll > 180) roll -= 360;
  if (roll <= -180) roll += 360;
  return { pitch, roll };
}

export interface Horizon {
  /** Centre of the horizon line, pixels. */
  x: number;
  y: number;
  /** Rotation of the horizon, radians (canvas: clockwise positive). */
  angle: number;
  /** Unit vector along the line. */
  dx: number;
  dy: number;
}

/** Nose up moves the horizon down; banking right (positive roll) turns it counter-clockwise. */
export function horizon(pitchDeg: number, rollDeg: number, cx: number, cy: number, pxPerDeg: number): Horizon {
  const { pitch, roll } = normalizeAttitude(pitchDeg, rollDeg);
  const angle = -roll * DEG;
  const dx = Math.cos(angle), dy = Math.sin(angle);
  // Shift perpendicular to the line, "down" in the aircraft frame.
  const off = pitch * pxPerDeg;
  return { x: cx - dy * off, y: cy + dx * off, angle, dx, dy };
}
