/** Alarm bands (dataset.alarms) → normal/warn/alarm, and entry detection for notifications. */

export interface AlarmBand {
  min: number;
  max: number;
  severity: "info" | "warning" | "critical" | string;
  label?: string;
}

export type Level = "normal" | "warn" | "alarm";

const RANK: Record<Level, number> = { normal: 0, warn: 1, alarm: 2 };

function levelOf(severity: string): Level {
  return severity === "critical" ? "alarm" : severity === "warning" ? "warn" : "normal";
}

/** The most severe band containing `value` (bounds inclusive, either order). */
export function classify(value: number, bands: readonly AlarmBand[] | null | undefined): { level: Level; band: AlarmBand | null } {
  let best: { level: Level; band: AlarmBand | null } = { level: "normal", band: null };
  if (!Number.isFinite(value) || !Array.isArray(bands)) return best;
  for (const b of bands) {
    if (!b || !Number.isFinite(b.min) || !Number.isFinite(b.max)) continue;
    const lo = Math.min(b.min, b.max);
    const hi = Math.max(b.min, b.max);
    if (value < lo || value > hi) continue;
    const level = levelOf(b.severity);
    if (best.band === null || RANK[level] > RANK[best.level]) best = { level, band: b };
  }
  return best;
}

/** Remembers each key's level; `update` says when a key entered a worse level, so a
 *  notification is raised once per entry, not on every frame. */
export class AlarmTracker {
  private levels = new Map<string, Level>();

  update(key: string, level: Level): boolean {
    const prev = this.levels.get(key) ?? "normal";
    this.levels.set(key, level);
    return RANK[level] > RANK[prev];
  }

  level(key: string): Level {
    return this.levels.get(key) ?? "normal";
  }
}

/** CSS colour variable for a level. */
export function levelColor(level: Level): string {
  return level === "alarm" ? "var(--alarm)" : level === "warn" ? "var(--warn)" : "var(--ok)";
}
