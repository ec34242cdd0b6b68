/** What a painter script runs with, on both sides of its worker: the messages, the dataset
 *  objects it reads, the theme, and how its code is checked and compiled. Pure, so it is
 *  tested without a worker.
 *
 *  A painter is a project's own JavaScript: `paint(ctx, datasets, w, h)` (or Serial
 *  Studio's `paint(ctx, w, h)` with a global `datasets`), and `onFrame()` before it when
 *  defined. It runs in a dedicated worker (`worker.ts`) drawing on the tile's canvas through
 *  an OffscreenCanvas. Before any of it runs, the worker removes every way out it has –
 *  everything on its global but the language's own objects and what a canvas needs
 *  (`KEEP`): network, storage, fonts, WebAssembly, timers, events, and every way to compile
 *  more code (eval, Function and the async and generator function constructors). Code that
 *  uses `import` is refused before it compiles. `sextant serve` also sends the worker's
 *  script with a CSP that allows no connection at all. The page times each frame itself and
 *  stops a worker whose frame runs past its budget. */

/** One dataset as a painter reads it (Serial Studio's field names). */
export interface PainterDataset {
  index: number;
  title: string;
  units: string;
  widget: string;
  value: number;
  rawValue: number;
  text: string;
  min: number;
  max: number;
  ledHigh: number;
  hasPlot: boolean;
  hasFft: boolean;
  hasLed: boolean;
}

/** The page to the worker. */
export type ToWorker =
  | { type: "start"; canvas: OffscreenCanvas; code: string; group: { id: string; title: string } }
  | { type: "frame"; w: number; h: number; dpr: number; datasets: PainterDataset[]; theme: PainterTheme; number: number; timestampMs: number };

/** The worker to the page. */
export type FromWorker =
  | { type: "ready" }
  | { type: "drawn"; number: number; ok: boolean }
  | { type: "error"; message: string; line: number | null };

/** Serial Studio's theme keys a painter may read, from the dashboard's palette. */
export interface PainterTheme {
  widget_base: string;
  widget_text: string;
  widget_border: string;
  widget_highlight: string;
  accent: string;
  alarm: string;
  placeholder_text: string;
  widget_colors: string[];
}

/** The most time one frame may take before it counts as slow, and how many slow frames in
 *  a row stop the painter. A frame still running after `HUNG_MS` ends the worker at once. */
export const FRAME_BUDGET_MS = 50;
export const SLOW_FRAMES_TO_STOP = 3;
export const HUNG_MS = 1000;

/** Why `code` cannot be a painter, before it runs: it imports modules (which would load
 *  code from the network), or it defines no paint function. */
export function refuse(code: string): string | null {
  // The keyword cannot be escaped or split, so any use of it is refused (a word like
  // `importance` is not it; `x.import` is, and is explained, never silent).
  if (/(^|[^\w$])import(?![\w$])/.test(code) || /^\s*export\s/m.test(code)) return "a painter cannot import modules";
  if (!/\bpaint\b/.test(code)) return "the script defines no paint(ctx, datasets, w, h) function";
  return null;
}

/** The names a painter's code sees as undefined, whatever the worker's global has (`eval`
 *  is not among them: strict code may not name a parameter so; the global one is gone). */
export const SHADOWED = [
  "fetch", "XMLHttpRequest", "WebSocket", "EventSource", "importScripts", "Worker", "SharedWorker",
  "indexedDB", "caches", "BroadcastChannel", "WebTransport", "postMessage", "close", "setTimeout",
  "setInterval", "queueMicrotask", "requestAnimationFrame", "Function", "self", "globalThis",
  "navigator", "fonts", "WebAssembly", "scheduler", "addEventListener", "onmessage",
] as const;

/** What stays on the worker's global once it is locked down: the language's own objects and
 *  what a canvas needs. Everything else – network, storage, fonts, WebAssembly, timers,
 *  events, the global's own methods – is removed. */
export const KEEP = new Set([
  "Object", "Array", "Number", "Boolean", "String", "Symbol", "BigInt", "Date", "RegExp", "Math", "JSON", "Intl",
  "Map", "Set", "WeakMap", "WeakSet", "WeakRef", "Promise", "Proxy", "Reflect", "Iterator",
  "Error", "AggregateError", "EvalError", "RangeError", "ReferenceError", "SyntaxError", "TypeError", "URIError",
  "ArrayBuffer", "DataView", "Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array",
  "Int32Array", "Uint32Array", "Float32Array", "Float64Array", "BigInt64Array", "BigUint64Array",
  "parseInt", "parseFloat", "isNaN", "isFinite", "encodeURI", "encodeURIComponent", "decodeURI", "decodeURIComponent",
  "NaN", "Infinity", "undefined",
  "OffscreenCanvas", "OffscreenCanvasRenderingContext2D", "CanvasGradient", "CanvasPattern", "Path2D", "ImageData",
  "DOMMatrix", "DOMMatrixReadOnly", "DOMPoint", "DOMPointReadOnly", "DOMRect", "DOMRectReadOnly", "TextMetrics",
]);

/** The line of the painter's code an error points at, from the engine's stack, or null.
 *  `offset` is how many lines the wrapper adds before the code. */
export function errorLine(stack: string | undefined, offset: number): number | null {
  const m = stack?.match(/<anonymous>:(\d+):\d+/) ?? stack?.match(/Function:(\d+):\d+/) ?? stack?.match(/eval[^:]*:(\d+):\d+/);
  if (!m) return null;
  const line = Number(m[1]) - offset;
  return line >= 1 ? line : null;
}

/** Counts slow frames in a row; says when the painter must stop. */
export class Budget {
  private slow = 0;
  constructor(readonly budgetMs = FRAME_BUDGET_MS, readonly limit = SLOW_FRAMES_TO_STOP) {}
  /** Takes one frame's time; true when the painter must stop. */
  frame(ms: number): boolean {
    this.slow = ms > this.budgetMs ? this.slow + 1 : 0;
    return this.slow >= this.limit;
  }
}
