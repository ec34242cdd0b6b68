/** In-app notifications (alarm episodes, save errors), mirrored to the system Notification
 *  API when the person allowed it. At most MAX_TOASTS stand at once (the oldest goes): a
 *  corner of the screen, not a wall. */

export interface Toast {
  id: number;
  level: "info" | "warn" | "alarm";
  title: string;
  body: string;
}

export const toasts: Toast[] = $state([]);
export const MAX_TOASTS = 4;
let nextId = 1;

export function notify(level: Toast["level"], title: string, body = "", system = false) {
  const id = nextId++;
  toasts.push({ id, level, title, body });
  while (toasts.length > MAX_TOASTS) toasts.shift();
  setTimeout(() => dismiss(id), level === "info" ? 5000 : 10000);
  if (system && typeof Notification !== "undefined") {
    try {
      if (Notification.permission === "granted") new Notification(title, { body });
      else if (Notification.permission === "default") void Notification.requestPermission();
    } catch {
      // Some webviews expose Notification but refuse to construct it.
    }
  }
}

export function dismiss(id: number) {
  const i = toasts.findIndex((t) => t.id === id);
  if (i >= 0) toasts.splice(i, 1);
}

export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** Something on screen a toast should keep off, and how much covering it costs per px². */
export interface KeepClear extends Rect {
  weight: number;
}

/** A tile's controls and readouts (buttons, a widget's bar, a legend, a table's rows) and the
 *  axes of its drawings cost most; the rest of a drawing (a plot's inside) less; a tile's
 *  empty space (under a short table, its header) least. */
export const WEIGHT = { controls: 1000, axes: 50, drawing: 4, tile: 1 } as const;

/** Axis strips of a drawing (a canvas): where charts draw their y labels (left) and x labels
 *  (bottom), dials their scales, and readouts their values. */
export const AXIS_STRIP = { left: 64, bottom: 40 } as const;

/** What to keep clear for a tile: the tile, its drawings (canvases) with their axis strips,
 *  and its controls and readouts. */
export function keepClearOf(tile: Rect, drawings: readonly Rect[], controls: readonly Rect[] = []): KeepClear[] {
  const out: KeepClear[] = [{ ...tile, weight: WEIGHT.tile }];
  for (const d of drawings) {
    const left = Math.min(AXIS_STRIP.left, d.w), bottom = Math.min(AXIS_STRIP.bottom, d.h);
    out.push(
      { ...d, weight: WEIGHT.drawing },
      { x: d.x, y: d.y, w: left, h: d.h, weight: WEIGHT.axes },
      { x: d.x, y: d.y + d.h - bottom, w: d.w, h: bottom, weight: WEIGHT.axes },
    );
  }
  for (const c of controls) out.push({ ...c, weight: WEIGHT.controls });
  return out;
}

/** Where the toast stack (`size`) goes inside `area`, `margin` from its edges: on free
 *  space, off every tile, when there is any (nearest the bottom-right corner, where toasts
 *  are looked for); else where it covers the least, weighted, so over a tile's empty space or
 *  the inside of a plot rather than across its axes, labels and buttons. Positions are tried
 *  every `cell` px from the bottom-right corner; the weights are summed per cell once (a
 *  summed-area table), so each try costs the same however much is on the screen. */
export function placeToasts(area: Rect, size: { w: number; h: number }, keep: readonly KeepClear[], margin = 16, cell = 6): { x: number; y: number; cost: number } {
  const x0 = area.x + margin, y0 = area.y + margin;
  const x1 = area.x + area.w - margin - size.w, y1 = area.y + area.h - margin - size.h;
  if (x1 < x0 || y1 < y0) return { x: Math.max(area.x, x1), y: Math.max(area.y, y1), cost: Infinity };
  // A grid whose last line is the stack's right (bottom) edge in the preferred corner.
  const right = x1 + size.w, bottom = y1 + size.h;
  const nx = Math.ceil((right - x0) / cell - 1e-9), ny = Math.ceil((bottom - y0) / cell - 1e-9);
  const gx = right - nx * cell, gy = bottom - ny * cell;
  // Summed-area table of the weighted cover of each cell: S[(j)(nx+1) + i] = sum over cells
  // left of column line i and above row line j.
  const S = new Float64Array((nx + 1) * (ny + 1));
  const at = (i: number, j: number) => j * (nx + 1) + i;
  for (const k of keep) {
    if (!(k.weight > 0) || k.w <= 0 || k.h <= 0) continue;
    const i0 = Math.max(0, Math.floor((k.x - gx) / cell)), i1 = Math.min(nx, Math.ceil((k.x + k.w - gx) / cell));
    const j0 = Math.max(0, Math.floor((k.y - gy) / cell)), j1 = Math.min(ny, Math.ceil((k.y + k.h - gy) / cell));
    for (let j = j0; j < j1; j++) {
      const cy = gy + j * cell;
      const oy = Math.min(cy + cell, k.y + k.h) - Math.max(cy, k.y);
      if (oy <= 0) continue;
      for (let i = i0; i < i1; i++) {
        const cx = gx + i * cell;
        const ox = Math.min(cx + cell, k.x + k.w) - Math.max(cx, k.x);
        if (ox > 0) S[at(i + 1, j + 1)] += ox * oy * k.weight;
      }
    }
  }
  for (let j = 1; j <= ny; j++) for (let i = 1; i <= nx; i++) S[at(i, j)] += S[at(i - 1, j)] + S[at(i, j - 1)] - S[at(i - 1, j - 1)];
  const sw = Math.ceil(size.w / cell - 1e-9), sh = Math.ceil(size.h / cell - 1e-9);
  const EPS = 1e-6;
  let best = { x: x1, y: y1, cost: Infinity, d: Infinity };
  for (let j = ny; j >= sh; j--) {
    const y = gy + j * cell - size.h;
    if (y < y0 - EPS) break;
    for (let i = nx; i >= sw; i--) {
      const x = gx + i * cell - size.w;
      if (x < x0 - EPS) break;
      const cost = S[at(i, j)] - S[at(i - sw, j)] - S[at(i, j - sh)] + S[at(i - sw, j - sh)];
      const d = x1 - x + (y1 - y);
      if (cost < best.cost - EPS || (Math.abs(cost - best.cost) <= EPS && d < best.d)) best = { x, y, cost, d };
    }
  }
  return { x: best.x, y: best.y, cost: best.cost < EPS ? 0 : best.cost };
}
