/** The app's one display subscription and one requestAnimationFrame loop. Frames go straight
 *  into a LiveStore (outside Svelte's reactivity); widgets register draw callbacks that the
 *  loop calls only when data changed since their last draw. Only rare facts (dataset list,
 *  whether data arrives, pause) are reactive, through `liveState`. */
import { settings } from "../settings.svelte";
import { transport, type DisplayOptions, type Unsubscribe } from "../transport";
import { LiveStore, RawRequests } from "./store";

export type DrawFn = (store: LiveStore) => void;

interface Drawer {
  fn: DrawFn;
  drawn: number;
  /** Runs even while paused (alarm monitoring: pause freezes drawing, not watching). */
  always: boolean;
}

export const liveState = $state({
  /** Bumped when the dataset list changes. */
  metaVersion: 0,
  /** True while frames arrived in the last 2 s. */
  receiving: false,
  paused: false,
  error: "",
});

export const store = new LiveStore();
const raw = new RawRequests();
/** Window points each mounted, visible plot can show (about two per pixel of its width). */
const windows = new RawRequests();
/** Callers that want every dataset's whole window for now (the dashboard's CSV export). */
let allWindows = 0;
/** Mounted consoles: without one, the device's bytes are not sent. */
let consoles = 0;
const drawers = new Set<Drawer>();
let users = 0;
let unsubscribe: Unsubscribe | null = null;
let sentKey = "";
let resubTimer: ReturnType<typeof setTimeout> | null = null;
let rafId = 0;
let lastFrameAt = 0;
let forceAll = false;

/** What the benchmark reads (`window.__sextantStats`): frames drawn and received, where the
 *  page's time went – milliseconds spent decoding frames and in widgets' draws, summed since
 *  start – and when (ms since the epoch) the first frame with device data was drawn, for
 *  start-up time. Two `performance.now()` calls a frame; nothing else is timed. */
const stats = { fps: 0, drawnFrames: 0, lastSeq: -1, framesReceived: 0, bytesReceived: 0, decodeMs: 0, drawMs: 0, firstDrawnAt: 0 };
let fpsWindowStart = 0;
let fpsCount = 0;

function options(): DisplayOptions {
  return {
    refreshHz: settings.refreshHz,
    points: settings.points,
    timeRangeS: settings.timeRangeS,
    raw: raw.resolve(store.byId),
    windows: allWindows > 0 ? {} : windowsFor(store.meta, windows.resolve(store.byId), pageHidden()),
    console: consoles > 0,
  };
}

const pageHidden = () => typeof document !== "undefined" && document.visibilityState === "hidden";

/** Window points per dataset: what the plots drawing it asked for, and none for a dataset
 *  no plot on screen draws, or for any while the page is hidden (a background tab or a
 *  minimised window draws nothing; newest values keep coming for the alarm watchers). */
export function windowsFor(meta: { index: number }[], asked: Record<number, number>, hidden: boolean): Record<number, number> {
  const out: Record<number, number> = {};
  for (const m of meta) out[m.index] = hidden ? 0 : (asked[m.index] ?? 0);
  return out;
}

function onFrame(buffer: ArrayBuffer) {
  const metaBefore = store.metaVersion;
  const t0 = performance.now();
  store.ingest(buffer);
  lastFrameAt = performance.now();
  stats.decodeMs += lastFrameAt - t0;
  stats.bytesReceived += buffer.byteLength;
  if (store.metaVersion !== metaBefore) {
    liveState.metaVersion = store.metaVersion;
    // Raw requests name datasets by id; indexes are known only now.
    scheduleResubscribe();
  }
}

let chain: Promise<void> = Promise.resolve();

/** Serialized, so an older subscription can never be installed after (and stop) a newer one. */
function subscribe(): Promise<void> {
  chain = chain.then(subscribeNow);
  return chain;
}

async function subscribeNow() {
  if (users === 0) return;
  const opts = options();
  const key = JSON.stringify(opts);
  if (key === sentKey && unsubscribe) return;
  sentKey = key;
  // A fresh handler per subscription: the old Unsubscribe then only stops its own stream.
  const handler = (f: ArrayBuffer) => onFrame(f);
  try {
    const off = await transport().display(opts, handler);
    const old = unsubscribe;
    unsubscribe = off;
    old?.();
    liveState.error = "";
    if (users === 0) stopStream();
  } catch (e) {
    sentKey = "";
    liveState.error = e instanceof Error ? e.message : String(e);
    // The backend may not be up yet: retry.
    if (users > 0) resubTimer ??= setTimeout(() => ((resubTimer = null), void subscribe()), 2000);
  }
}

function scheduleResubscribe() {
  if (users === 0 || resubTimer) return;
  resubTimer = setTimeout(() => {
    resubTimer = null;
    void subscribe();
  }, 30);
}

function stopStream() {
  unsubscribe?.();
  unsubscribe = null;
  sentKey = "";
}

let watched = "";

function loop(ts: number) {
  rafId = requestAnimationFrame(loop);
  // Settings are compared here rather than in an $effect: three reads per frame, and it
  // works wherever the loop runs (effects need a component or root to live in).
  const view = `${settings.refreshHz}/${settings.points}/${settings.timeRangeS}`;
  if (view !== watched) {
    if (watched) scheduleResubscribe();
    watched = view;
  }
  const receiving = ts - lastFrameAt < 2000 && lastFrameAt > 0;
  if (receiving !== liveState.receiving) liveState.receiving = receiving;
  stats.lastSeq = store.lastSeq;
  stats.framesReceived = store.framesReceived;
  {
    const paused = liveState.paused;
    let drew = false;
    const v = store.version;
    const all = forceAll && !paused;
    if (!paused) forceAll = false;
    const t0 = performance.now();
    for (const d of drawers) {
      if ((d.drawn === v && !all) || (paused && !d.always)) continue;
      d.drawn = v;
      try {
        d.fn(store);
      } catch (e) {
        // One broken widget must not stop the others.
        console.error("widget draw failed", e);
      }
      // Watchers are not drawing: pause must freeze the count the benchmark reads.
      if (!d.always) drew = true;
    }
    stats.drawMs += performance.now() - t0;
    if (drew) {
      if (!stats.firstDrawnAt && store.deviceFrames > 0) {
        stats.firstDrawnAt = Date.now();
        transport().firstFrameDrawn();
      }
      stats.drawnFrames++;
      fpsCount++;
    }
  }
  if (ts - fpsWindowStart >= 1000) {
    stats.fps = Math.round((fpsCount * 1000) / Math.max(1, ts - fpsWindowStart));
    fpsCount = 0;
    fpsWindowStart = ts;
  }
}

let watchTimer: ReturnType<typeof setInterval> | null = null;

/** A hidden page gets no animation frames, so the loop stops; the alarm watchers still run
 *  (twice a second, as fast as a background tab's timers go) and the windows are not sent. */
function onVisibility() {
  scheduleResubscribe();
  if (pageHidden()) {
    watchTimer ??= setInterval(runWatchers, 500);
  } else {
    stopWatching();
    invalidate();
  }
}

function stopWatching() {
  if (watchTimer) clearInterval(watchTimer);
  watchTimer = null;
}

function runWatchers() {
  for (const d of drawers) {
    if (!d.always || d.drawn === store.version) continue;
    d.drawn = store.version;
    try {
      d.fn(store);
    } catch (e) {
      console.error("alarm watcher failed", e);
    }
  }
}

/** Starts frames and the loop for a screen; returns its release. */
export function acquire(): () => void {
  users++;
  if (users === 1) {
    (globalThis as any).__sextantStats = stats;
    // What every widget reads (the newest value of a dataset by id), for end-to-end tests
    // that must know a widget shows a number, not a dash.
    (globalThis as any).__sextantValue = (id: string) => store.value(id);
    void subscribe();
    if (!rafId && typeof requestAnimationFrame === "function") rafId = requestAnimationFrame(loop);
    if (typeof document !== "undefined") document.addEventListener("visibilitychange", onVisibility);
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    users--;
    if (users === 0) {
      if (resubTimer) clearTimeout(resubTimer);
      resubTimer = null;
      stopStream();
      cancelAnimationFrame(rafId);
      rafId = 0;
      if (typeof document !== "undefined") document.removeEventListener("visibilitychange", onVisibility);
      stopWatching();
    }
  };
}

/** Registers a draw callback; it runs in the loop whenever data changed since its last run. */
export function register(fn: DrawFn, opts: { always?: boolean } = {}): () => void {
  const d: Drawer = { fn, drawn: -1, always: !!opts.always };
  drawers.add(d);
  return () => drawers.delete(d);
}

/** Redraws everyone on the next tick (resize, theme change, un-pause). */
export function invalidate() {
  forceAll = true;
}

/** Asks for up to `n` window points of a dataset while a plot shows it; the backend sends
 *  no more than the largest request (and than the points setting). Release when the plot
 *  is unmounted or scrolled out of view. */
export function requestWindow(id: string, n: number): () => void {
  const release = windows.add(id, n);
  scheduleResubscribe();
  return () => {
    release();
    scheduleResubscribe();
  };
}

/** Every dataset's whole window (at the points setting), from the first frame after this
 *  resolves until the returned release is called: what a CSV of the dashboard exports,
 *  including datasets no plot draws. */
export async function requestAllWindows(): Promise<() => void> {
  allWindows++;
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    allWindows--;
    scheduleResubscribe();
  };
  await subscribe();
  // A frame already on its way may predate the new options: wait for the second one (or
  // give up after 2 s – nothing arriving means nothing newer to export).
  const seen = store.framesReceived;
  const until = performance.now() + 2000;
  await new Promise<void>((done) => {
    const check = () => (store.framesReceived >= seen + 2 || performance.now() > until ? done() : setTimeout(check, 16));
    check();
  });
  return release;
}

/** Asks for the console's bytes while a console is mounted; the bytes the backend still
 *  keeps arrive first. */
export function requestConsole(): () => void {
  consoles++;
  void subscribe();
  let released = false;
  return () => {
    if (released) return;
    released = true;
    consoles--;
    scheduleResubscribe();
  };
}

/** Asks for `n` undecimated newest samples of a dataset while the widget is mounted. */
export function requestRaw(id: string, n: number): () => void {
  const release = raw.add(id, n);
  scheduleResubscribe();
  return () => {
    release();
    scheduleResubscribe();
  };
}

export function setPaused(p: boolean) {
  liveState.paused = p;
  if (!p) invalidate();
}
