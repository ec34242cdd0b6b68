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
const drawers = new Set<Drawer>();
let users = 0;
let unsubscribe: Unsubscribe | null = null;
let sentKey = "";
let resubTimer: ReturnType<typeof setTimeout> | null = null;
let rafId = 0;
let lastFrameAt = 0;
let forceAll = false;

const stats = { fps: 0, drawnFrames: 0, lastSeq: -1, framesReceived: 0 };
let fpsWindowStart = 0;
let fpsCount = 0;

function options(): DisplayOptions {
  return {
    refreshHz: settings.refreshHz,
    points: settings.points,
    timeRangeS: settings.timeRangeS,
    raw: raw.resolve(store.byId),
  };
}

function onFrame(buffer: ArrayBuffer) {
  const metaBefore = store.metaVersion;
  store.ingest(buffer);
  lastFrameAt = performance.now();
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
    if (drew) {
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
