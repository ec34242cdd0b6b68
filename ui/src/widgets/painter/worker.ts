/// <reference lib="webworker" />
/** A painter's worker: it locks itself down, compiles the project's painter code once, and
 *  draws a frame on the tile's OffscreenCanvas each time the page asks (sandbox.ts says
 *  what the code sees and what it cannot reach). */
import { KEEP, SHADOWED, errorLine, refuse, type FromWorker, type PainterDataset, type PainterTheme, type ToWorker } from "./sandbox";

const scope = self as unknown as DedicatedWorkerGlobalScope;
const post = scope.postMessage.bind(scope) as (m: FromWorker) => void;
const compile = Function;
const freeze = Object.freeze;

/** Lines the wrapper puts before the code: the function header and "use strict". */
const WRAPPER_LINES = 3;

let ctx: OffscreenCanvasRenderingContext2D | null = null;
let canvas: OffscreenCanvas | null = null;
let paint: ((...args: unknown[]) => unknown) | undefined;
let onFrame: (() => unknown) | undefined;
let fourArgs = true;
let lastError = "";
const datasets: PainterDataset[] = [];
const frame = { number: 0, timestampMs: 0 };
const theme = {} as PainterTheme;
const group = { id: "", title: "" };
const log = (..._args: unknown[]) => {};
const consoleShim = freeze({ log, info: log, debug: log, warn: log, error: log });

function fail(e: unknown) {
  const err = e instanceof Error ? e : new Error(String(e));
  const message = err.message || String(e);
  if (message === lastError) return;
  lastError = message;
  post({ type: "error", message, line: errorLine(err.stack, WRAPPER_LINES) });
}

function start(m: Extract<ToWorker, { type: "start" }>) {
  canvas = m.canvas;
  ctx = canvas.getContext("2d");
  group.id = String(m.group.id);
  group.title = String(m.group.title);
  const why = refuse(m.code);
  if (why) return fail(new Error(why));
  try {
    const body = `"use strict";\n${m.code}\n;return { paint: typeof paint === "function" ? paint : undefined, onFrame: typeof onFrame === "function" ? onFrame : undefined };`;
    const factory = new compile(...SHADOWED, "datasets", "group", "frame", "theme", "console", body) as (...a: unknown[]) => { paint?: typeof paint; onFrame?: typeof onFrame };
    const made = factory(...SHADOWED.map(() => undefined), datasets, freeze(group), frame, theme, consoleShim);
    if (!made.paint) return fail(new Error("the script defines no paint(ctx, datasets, w, h) function"));
    paint = made.paint;
    onFrame = made.onFrame;
    // Serial Studio's painters take (ctx, w, h) and read the global `datasets`.
    fourArgs = paint.length >= 4;
    post({ type: "ready" });
  } catch (e) {
    fail(e);
  }
}

function draw(m: Extract<ToWorker, { type: "frame" }>) {
  if (!canvas || !ctx || !paint) return;
  const pw = Math.max(1, Math.round(m.w * m.dpr)), ph = Math.max(1, Math.round(m.h * m.dpr));
  if (canvas.width !== pw || canvas.height !== ph) {
    canvas.width = pw;
    canvas.height = ph;
  }
  datasets.length = 0;
  for (const d of m.datasets) datasets.push(freeze(d));
  Object.assign(theme, m.theme);
  frame.number = m.number;
  frame.timestampMs = m.timestampMs;
  let ok = true;
  ctx.save();
  try {
    ctx.setTransform(m.dpr, 0, 0, m.dpr, 0, 0);
    ctx.clearRect(0, 0, m.w, m.h);
    onFrame?.();
    if (fourArgs) paint(ctx, datasets, m.w, m.h);
    else paint(ctx, m.w, m.h);
    lastError = "";
  } catch (e) {
    ok = false;
    fail(e);
  } finally {
    ctx.restore();
  }
  post({ type: "drawn", number: m.number, ok });
}

// Serial Studio's text helper, on every context this worker makes.
Object.defineProperty(OffscreenCanvasRenderingContext2D.prototype, "measureTextWidth", {
  value(this: OffscreenCanvasRenderingContext2D, text: string) {
    return this.measureText(String(text)).width;
  },
});

scope.addEventListener("message", (e: MessageEvent<ToWorker>) => {
  const m = e.data;
  if (m?.type === "start") start(m);
  else if (m?.type === "frame") draw(m);
});

// The lock-down: everything on the global and its prototypes that is not the language's
// own or a canvas's goes, before any painter code exists. The listener above stays
// registered; the code can neither add another nor reach the global's methods.
for (let o: object | null = globalThis; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
  for (const name of Object.getOwnPropertyNames(o)) {
    if (KEEP.has(name)) continue;
    try {
      delete (o as Record<string, unknown>)[name];
    } catch {}
    try {
      if (Object.getOwnPropertyDescriptor(o, name)) Object.defineProperty(o, name, { value: undefined, writable: false, configurable: false });
    } catch {}
  }
}
for (const f of [function () {}, async function () {}, function* () {}, async function* () {}]) {
  try {
    Object.defineProperty(Object.getPrototypeOf(f), "constructor", { value: undefined, writable: false, configurable: false });
  } catch {}
}
