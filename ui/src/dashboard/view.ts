/** Following the backend's dashboard view (`dashboard.setView` from any door, e.g. the
 *  assistant): which local display settings change. Pure, so it is tested without a page. */
import type { Settings } from "../lib/settings.svelte";
import type { DashboardView } from "../lib/wire/types.gen";
import { MAX_RATE_HZ, MIN_RATE_HZ } from "../lib/display/limits.gen";

/** The backend's view (`dashboard.getView`/`setView`, the `viewChanged` event), generated
 *  from `sextant_runtime::DashboardView`. An event is read field by field, so each may be
 *  missing (another backend version) without harm. */
export type BackendView = Partial<DashboardView>;

/** The settings to change for `view`, or null when it changes nothing. The backend allows
 *  more points than the display does, so they are clamped to what the UI can request. */
export function settingsForView(current: Settings, view: BackendView): Partial<Settings> | null {
  const next: Partial<Settings> = {};
  if (typeof view.timeRangeS === "number" && Number.isFinite(view.timeRangeS) && view.timeRangeS > 0 && view.timeRangeS !== current.timeRangeS) {
    next.timeRangeS = view.timeRangeS;
  }
  if (typeof view.points === "number" && Number.isFinite(view.points)) {
    const points = Math.min(100000, Math.max(2, Math.round(view.points)));
    if (points !== current.points) next.points = points;
  }
  if (typeof view.refreshHz === "number" && Number.isFinite(view.refreshHz)) {
    const hz = Math.min(MAX_RATE_HZ, Math.max(MIN_RATE_HZ, Math.round(view.refreshHz)));
    if (hz !== current.refreshHz) next.refreshHz = hz;
  }
  return Object.keys(next).length ? next : null;
}
