/** Where a replay is, from `replay.getState` (`{replays: [{paused, speed, atEnd, positionS,
 *  durationS}]}`), folded into the one set of controls the Recording screen shows
 *  (replay.setState acts on every replay at once). Pure, so tests can pin it. */

export interface ReplayProgress {
  /** Every replay is paused. */
  paused: boolean;
  /** Speed of the first replay (1 = real time, 0 = as fast as possible). */
  speed: number;
  /** Seconds into the recording, within 0…durationS when the duration is known. */
  positionS: number;
  /** Length of the longest replay in seconds; null when none says. */
  durationS: number | null;
  /** How many replays are playing. */
  count: number;
  /** Every replay played to its end and holds there: Play starts again from the beginning. */
  atEnd?: boolean;
}

/** Poll period: quick while something plays, slow otherwise (idle or paused). */
export const POLL_PLAYING_MS = 250;
export const POLL_IDLE_MS = 1000;

const finite = (x: unknown): number | null => (typeof x === "number" && Number.isFinite(x) ? x : null);

/** The folded state, or null when nothing replays or the answer is not understood. */
export function parseReplayState(raw: unknown): ReplayProgress | null {
  const list = (raw as { replays?: unknown } | null)?.replays;
  if (!Array.isArray(list)) return null;
  const items = list.filter((r): r is Record<string, unknown> => !!r && typeof r === "object");
  if (!items.length) return null;
  let duration: number | null = null;
  let position = 0;
  for (const r of items) {
    const d = finite(r.durationS);
    if (d !== null && d >= 0) duration = Math.max(duration ?? 0, d);
    position = Math.max(position, finite(r.positionS) ?? 0);
  }
  const speed = finite(items[0].speed);
  return {
    paused: items.every((r) => r.paused === true),
    speed: speed !== null && speed >= 0 ? speed : 1,
    positionS: clampPosition(position, duration),
    durationS: duration,
    count: items.length,
    // Only a backend that holds replays at their end says so.
    ...(items.some((r) => "atEnd" in r) ? { atEnd: items.every((r) => r.atEnd === true) } : {}),
  };
}

/** A position within 0…duration (0…∞ when the duration is unknown). */
export function clampPosition(positionS: number, durationS: number | null): number {
  if (!Number.isFinite(positionS) || positionS < 0) return 0;
  return durationS !== null && Number.isFinite(durationS) && durationS >= 0 ? Math.min(positionS, durationS) : positionS;
}

/** Played share 0…1 for a progress bar; 0 when the duration is unknown or zero. */
export function progressFraction(positionS: number, durationS: number | null): number {
  if (durationS === null || !Number.isFinite(durationS) || durationS <= 0) return 0;
  return clampPosition(positionS, durationS) / durationS;
}

/** Milliseconds until the next `replay.getState`. */
export function pollDelay(progress: ReplayProgress | null): number {
  return progress && !progress.paused ? POLL_PLAYING_MS : POLL_IDLE_MS;
}

/** The speed choices of the controls, with a speed the backend reports that is not among
 *  them (e.g. set through the API) added in order, so the select can show it. */
export const SPEEDS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 100, 0];
export function speedChoices(current: number, base: readonly number[] = SPEEDS): number[] {
  if (!Number.isFinite(current) || current < 0 || base.includes(current)) return [...base];
  const finiteOnes = [...base.filter((s) => s > 0), current].sort((a, b) => a - b);
  return base.includes(0) ? [...finiteOnes, 0] : finiteOnes;
}
