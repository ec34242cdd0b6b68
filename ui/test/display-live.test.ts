import { beforeEach, describe, expect, it, vi } from "vitest";
import { encodeFrame } from "../src/lib/display/decode";

// A fake transport recording display subscriptions.
const subs: { options: any; handler: (f: ArrayBuffer) => void; stopped: boolean }[] = [];
const told = { firstFrameDrawn: 0 };
vi.mock("../src/lib/transport", () => ({
  transport: () => ({
    kind: "websocket",
    call: async () => ({}),
    onEvent: () => () => {},
    display: async (options: any, handler: (f: ArrayBuffer) => void) => {
      const s = { options, handler, stopped: false };
      subs.push(s);
      return () => (s.stopped = true);
    },
    firstFrameDrawn: () => told.firstFrameDrawn++,
  }),
}));

// Manual animation frames.
let rafQueue: ((ts: number) => void)[] = [];
let clock = 0;
(globalThis as any).requestAnimationFrame = (cb: (ts: number) => void) => (rafQueue.push(cb), rafQueue.length);
(globalThis as any).cancelAnimationFrame = () => {};
function tick() {
  clock += 16;
  const q = rafQueue;
  rafQueue = [];
  q.forEach((cb) => cb(clock));
}

const live = await import("../src/lib/display/live.svelte");
const { settings } = await import("../src/lib/settings.svelte");
const meta = [
  { index: 0, id: "a", title: "A", group: "g", units: "", source: 0 },
  { index: 1, id: "b", title: "B", group: "g", units: "", source: 0 },
];
const frame = (seq: number, withMeta = false) =>
  encodeFrame({ seq, now: seq, frames: seq, meta: withMeta ? meta : null, text: {}, datasets: [{ index: 0, last: seq, t: [seq], v: [seq] }] });
const wait = (ms = 60) => new Promise((r) => setTimeout(r, ms));

describe("live display", () => {
  beforeEach(() => {
    subs.length = 0;
  });

  it("subscribes once, resubscribes for raw requests by index, and draws only on change", async () => {
    const release = live.acquire();
    await wait();
    expect(subs).toHaveLength(1);
    expect(subs[0].options).toMatchObject({ refreshHz: 60, points: 1000, timeRangeS: 10, raw: {}, windows: {}, console: false });

    const draws: number[] = [];
    const off = live.register((s) => draws.push(s.lastSeq));
    // A raw request for a dataset whose index is not known yet changes nothing on the wire.
    const stopRaw = live.requestRaw("b", 512);
    const stopRaw2 = live.requestRaw("b", 2048);
    await wait();
    expect(subs).toHaveLength(1);

    subs[0].handler(frame(0, true));
    await wait();
    // Meta arrived: "b" is index 1, the larger request wins, and the old stream is stopped.
    expect(subs).toHaveLength(2);
    expect(subs[1].options.raw).toEqual({ 1: 2048 });
    expect(subs[0].stopped).toBe(true);

    tick();
    tick();
    expect(draws).toEqual([0]);
    // No device frame yet: start-up is not over.
    expect(told.firstFrameDrawn).toBe(0);
    subs[1].handler(frame(1));
    tick();
    tick();
    expect(draws).toEqual([0, 1]);
    expect((globalThis as any).__sextantStats).toMatchObject({ drawnFrames: 2, lastSeq: 1, framesReceived: 2 });
    // The first frame with a device's data was drawn: the app is told, once.
    expect(told.firstFrameDrawn).toBe(1);

    // Pause freezes drawing while frames keep arriving; alarm watchers still run.
    const always: number[] = [];
    const offAlways = live.register((s) => always.push(s.lastSeq), { always: true });
    live.setPaused(true);
    subs[1].handler(frame(2));
    tick();
    expect(draws).toEqual([0, 1]);
    expect(always.at(-1)).toBe(2);
    live.setPaused(false);
    tick();
    expect(draws).toEqual([0, 1, 2]);
    expect(told.firstFrameDrawn).toBe(1);

    stopRaw2();
    await wait();
    expect(subs.at(-1)!.options.raw).toEqual({ 1: 512 });
    stopRaw();
    off();
    offAlways();
    release();
    expect(subs.at(-1)!.stopped).toBe(true);
  });

  it("re-sends options when the time range or points setting changes", async () => {
    const release = live.acquire();
    await wait();
    const before = subs.length;
    settings.timeRangeS = 30;
    settings.points = 250;
    tick();
    await wait();
    expect(subs.length).toBe(before + 1);
    expect(subs.at(-1)!.options).toMatchObject({ timeRangeS: 30, points: 250 });
    expect(subs.at(-2)!.stopped).toBe(true);
    release();
    settings.timeRangeS = 10;
    settings.points = 1000;
  });

  it("a widget that throws does not stop the others", async () => {
    const release = live.acquire();
    await wait();
    const ok: number[] = [];
    const offBad = live.register(() => {
      throw new Error("boom");
    });
    const offOk = live.register((s) => ok.push(s.lastSeq));
    const err = vi.spyOn(console, "error").mockImplementation(() => {});
    subs.at(-1)!.handler(frame(5, true));
    tick();
    expect(ok).toEqual([5]);
    expect(err).toHaveBeenCalled();
    err.mockRestore();
    offBad();
    offOk();
    release();
  });

  it("asks each dataset's window at the size its plots draw, none for the rest, all for an export", async () => {
    const release = live.acquire();
    await wait();
    subs.at(-1)!.handler(frame(7, true));
    await wait();
    // Nothing draws a window yet: none is sent for either dataset.
    expect(subs.at(-1)!.options.windows).toEqual({ 0: 0, 1: 0 });
    const narrow = live.requestWindow("a", 768);
    const wide = live.requestWindow("a", 1536);
    await wait();
    expect(subs.at(-1)!.options.windows).toEqual({ 0: 1536, 1: 0 });
    wide();
    await wait();
    expect(subs.at(-1)!.options.windows).toEqual({ 0: 768, 1: 0 });
    // An export wants every window whole, until it is done.
    const exporting = live.requestAllWindows();
    await wait();
    const sub = subs.at(-1)!;
    expect(sub.options.windows).toEqual({});
    sub.handler(frame(8));
    sub.handler(frame(9));
    const done = await exporting;
    done();
    await wait();
    expect(subs.at(-1)!.options.windows).toEqual({ 0: 768, 1: 0 });
    narrow();
    release();
  });

  it("asks for the console's bytes only while a console is mounted", async () => {
    const release = live.acquire();
    await wait();
    expect(subs.at(-1)!.options.console).toBe(false);
    const a = live.requestConsole();
    const b = live.requestConsole();
    await wait();
    expect(subs.at(-1)!.options.console).toBe(true);
    a();
    a(); // a second release of the same request changes nothing
    await wait();
    expect(subs.at(-1)!.options.console).toBe(true);
    b();
    await wait();
    expect(subs.at(-1)!.options.console).toBe(false);
    release();
  });

  it("a hidden page asks for no windows", () => {
    const meta2 = [{ index: 0 }, { index: 3 }];
    expect(live.windowsFor(meta2, { 0: 512, 3: 1024 }, false)).toEqual({ 0: 512, 3: 1024 });
    expect(live.windowsFor(meta2, { 0: 512 }, false)).toEqual({ 0: 512, 3: 0 });
    expect(live.windowsFor(meta2, { 0: 512, 3: 1024 }, true)).toEqual({ 0: 0, 3: 0 });
  });
});
