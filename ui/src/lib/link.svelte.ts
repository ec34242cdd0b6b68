/** The live run as every screen reads it: the last `io.status` (the shell polls it once a
 *  second and on connect/disconnect events) and since when no byte arrived. One poller, so
 *  the sidebar, the dashboard and its action buttons never disagree. */
import type { IoStatus } from "./wire/types.gen";
import { quietSince, type Quiet } from "../screens/status";

export const link = $state<{ status: IoStatus | null; quiet: Quiet }>({ status: null, quiet: { bytes: 0, sinceMs: 0 } });

/** Records a fresh status read at `nowMs`. */
export function observe(status: IoStatus | null, nowMs: number) {
  link.quiet = quietSince(link.quiet, status, nowMs);
  link.status = status;
}
