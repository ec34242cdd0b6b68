/** Theme colours for canvas drawing, read once per theme from app.css variables (canvases
 *  cannot use var()). A theme switch bumps `themeState.version` and redraws everything. */
import { invalidate } from "../lib/display/live.svelte";

export interface Palette {
  text: string;
  muted: string;
  panel: string;
  panel2: string;
  border: string;
  grid: string;
  accent: string;
  ok: string;
  warn: string;
  alarm: string;
  series: string[];
}

export const themeState = $state({ version: 0 });
let cached: Palette | null = null;
let observing = false;

function observe() {
  if (observing || typeof MutationObserver === "undefined") return;
  observing = true;
  new MutationObserver(() => {
    cached = null;
    themeState.version++;
    invalidate();
  }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
}

export function palette(): Palette {
  observe();
  if (cached) return cached;
  const cs = getComputedStyle(document.documentElement);
  const v = (name: string, fallback: string) => cs.getPropertyValue(name).trim() || fallback;
  cached = {
    text: v("--text", "#1b1f24"),
    muted: v("--muted", "#5d6875"),
    panel: v("--panel", "#fff"),
    panel2: v("--panel-2", "#eef0f3"),
    border: v("--border", "#d5dae1"),
    grid: v("--plot-grid", "rgba(0,0,0,0.08)"),
    accent: v("--accent", "#1f6feb"),
    ok: v("--ok", "#1a7f37"),
    warn: v("--warn", "#b08800"),
    alarm: v("--alarm", "#cf222e"),
    series: [1, 2, 3, 4, 5, 6, 7, 8].map((i) => v(`--series-${i}`, "#888")),
  };
  return cached;
}

export function levelStroke(p: Palette, level: "normal" | "warn" | "alarm"): string {
  return level === "alarm" ? p.alarm : level === "warn" ? p.warn : p.ok;
}
