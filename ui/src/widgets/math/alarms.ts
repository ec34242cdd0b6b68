/** Alarm bands (dataset.alarms) → normal/warn/alarm, and alarm episodes: when a
 *  notification is due (once per episode, with hysteresis and a cooldown). */

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

/** How far past a band's edge a value must be before the alarm counts as cleared, as a
 *  share of the dataset's range (else of the band's width, else of the edge's size): a
 *  value hovering at the threshold, noise on it, never clears and re-raises. */
export const HYSTERESIS = 0.02;
/** An alarm raised again within this long of last being active is the same episode: it
 *  does not notify again. */
export const COOLDOWN_MS = 30_000;

/** The margin past `band`'s edges that clears it (see HYSTERESIS). `range`: the dataset's
 *  max − min when it has one. */
export function clearMargin(band: AlarmBand, range?: number | null): number {
  const lo = Math.min(band.min, band.max);
  const hi = Math.max(band.min, band.max);
  const edge = Math.max(Number.isFinite(lo) ? Math.abs(lo) : 0, Number.isFinite(hi) ? Math.abs(hi) : 0);
  for (const span of [range, hi - lo, edge]) {
    if (typeof span === "number" && Number.isFinite(span) && span > 0) return HYSTERESIS * span;
  }
  return 0;
}

interface Episode {
  /** The level held: it drops only once the value is clear of its band by the margin. */
  level: Level;
  band: AlarmBand | null;
  /** The last time (ms) each level was held. */
  activeAt: Partial<Record<Level, number>>;
}

/** Alarm episodes per key (a dataset): `update` answers the level to notify, or null. One
 *  notification per episode: entering a worse level notifies; a value that falls back
 *  only clears once it is past the band's edge by the clearing margin (hysteresis); and a
 *  level raised again within COOLDOWN_MS of last being held does not notify again. */
export class AlarmEpisodes {
  private episodes = new Map<string, Episode>();

  constructor(private readonly cooldownMs = COOLDOWN_MS) {}

  /** `value` of `key` at `now` (ms, any monotonic clock) against `bands`; `range` as for
   *  clearMargin. Returns the band entered when this should notify. */
  update(
    key: string,
    value: number,
    bands: readonly AlarmBand[] | null | undefined,
    now: number,
    range?: number | null,
  ): { level: Level; band: AlarmBand | null } | null {
    let ep = this.episodes.get(key);
    if (!ep) this.episodes.set(key, (ep = { level: "normal", band: null, activeAt: {} }));
    // No value is not a cleared alarm: the episode stands as it was.
    if (!Number.isFinite(value)) return null;
    const raw = classify(value, bands);
    let raised = false;
    if (RANK[raw.level] > RANK[ep.level]) {
      ep.level = raw.level;
      ep.band = raw.band;
      raised = true;
    } else if (RANK[raw.level] < RANK[ep.level] && this.clear(ep, value, bands, range)) {
      ep.level = raw.level;
      ep.band = raw.band;
    }
    const last = ep.activeAt[ep.level];
    for (const l of Object.keys(RANK) as Level[]) if (RANK[l] <= RANK[ep.level]) ep.activeAt[l] = now;
    if (!raised || ep.level === "normal") return null;
    return last !== undefined && now - last < this.cooldownMs ? null : { level: ep.level, band: ep.band };
  }

  /** The level held for `key` (with hysteresis), "normal" when unknown. */
  level(key: string): Level {
    return this.episodes.get(key)?.level ?? "normal";
  }

  /** Whether `value` is clear of the held band by its margin. A band the project no longer
   *  has holds nothing. */
  private clear(ep: Episode, value: number, bands: readonly AlarmBand[] | null | undefined, range?: number | null): boolean {
    const band = ep.band;
    if (!band || !bands?.some((b) => b.min === band.min && b.max === band.max && b.severity === band.severity)) return true;
    const m = clearMargin(band, range);
    return value < Math.min(band.min, band.max) - m || value > Math.max(band.min, band.max) + m;
  }
}

/** CSS colour variable for a level. */
export function levelColor(level: Level): string {
  return level === "alarm" ? "var(--alarm)" : level === "warn" ? "var(--warn)" : "var(--ok)";
}
