import { describe, expect, it } from "vitest";
import { encodeFrame } from "../src/lib/display/decode";
import { ConsoleRing, LiveStore, RawRequests } from "../src/lib/display/store";

const meta = (ids: string[]) => ids.map((id, index) => ({ index, id, title: id.toUpperCase(), group: "g", units: "u", source: 0 }));
type Ds = { index: number; last: number; t: number[]; v: number[]; rawT?: number[]; rawV?: number[] };
const frame = (seq: number, datasets: Ds[], extra: { meta?: ReturnType<typeof meta> | null; text?: Record<number, string>; console?: { t: number; source: number; bytes: Uint8Array }[] } = {}) =>
  encodeFrame({ seq, now: seq, frames: seq, meta: extra.meta ?? null, text: extra.text ?? {}, datasets, console: extra.console });

describe("LiveStore", () => {
  it("maps ids to indexes from meta and keeps the newest window per dataset", () => {
    const s = new LiveStore();
    s.ingest(frame(0, [{ index: 0, last: 2, t: [0, 1], v: [1, 2] }, { index: 1, last: 5, t: [0], v: [5] }], { meta: meta(["a", "b"]) }));
    expect(s.byId.get("b")).toBe(1);
    expect(s.value("a")).toBe(2);
    s.ingest(frame(1, [{ index: 0, last: 9, t: [1, 2, 3], v: [7, 8, 9] }]));
    // Replaced, not appended: the frame carries the whole window.
    expect(Array.from(s.block("a")!.v)).toEqual([7, 8, 9]);
    // A dataset absent from a frame keeps its last window.
    expect(s.value("b")).toBe(5);
    expect(s.lastSeq).toBe(1);
    expect(s.framesReceived).toBe(2);
    expect(s.version).toBe(2);
  });

  it("drops windows whose index left the meta and remaps moved ids", () => {
    const s = new LiveStore();
    s.ingest(frame(0, [{ index: 0, last: 1, t: [0], v: [1] }, { index: 1, last: 2, t: [0], v: [2] }], { meta: meta(["a", "b"]), text: { 1: "txt" } }));
    expect(s.textOf("b")).toBe("txt");
    s.ingest(frame(1, [], { meta: [{ index: 0, id: "b", title: "B", group: "g", units: "", source: 0 }] }));
    expect(s.byId.has("a")).toBe(false);
    expect(s.byId.get("b")).toBe(0);
    expect(s.blocks.has(1)).toBe(false);
    expect(s.text.has(1)).toBe(false);
    expect(s.metaVersion).toBe(2);
  });

  it("keeps text values until a numeric value arrives", () => {
    const s = new LiveStore();
    s.ingest(frame(0, [{ index: 0, last: NaN, t: [], v: [] }], { meta: meta(["a"]), text: { 0: "OK" } }));
    expect(s.textOf("a")).toBe("OK");
    s.ingest(frame(1, [{ index: 0, last: NaN, t: [], v: [] }]));
    expect(s.textOf("a")).toBe("OK");
    s.ingest(frame(2, [{ index: 0, last: 4, t: [2], v: [4] }]));
    expect(s.textOf("a")).toBeUndefined();
  });

  it("counts bad frames instead of throwing and leaves state untouched", () => {
    const s = new LiveStore();
    expect(s.ingest(new ArrayBuffer(3))).toBe(false);
    expect(s.ingest(new Uint8Array(80).buffer)).toBe(false);
    expect(s.badFrames).toBe(2);
    expect(s.version).toBe(0);
    expect(s.lastError).toMatch(/short|magic/);
  });

  it("copies console bytes out of the frame buffer", () => {
    const s = new LiveStore();
    const buf = frame(0, [], { console: [{ t: 1, source: 0, bytes: new TextEncoder().encode("hi\n") }] });
    s.ingest(buf);
    expect(s.console.chunks[0].bytes.buffer).not.toBe(buf);
    expect(new TextDecoder().decode(s.console.chunks[0].bytes)).toBe("hi\n");
    expect(s.console.appended).toBe(3);
  });

  it("value() is NaN for unknown ids", () => {
    expect(Number.isNaN(new LiveStore().value("nope"))).toBe(true);
  });
});

describe("ConsoleRing", () => {
  it("caps the bytes kept, dropping the oldest first", () => {
    const r = new ConsoleRing(10);
    r.append(0, 0, new Uint8Array([1, 2, 3, 4]));
    r.append(1, 0, new Uint8Array([5, 6, 7, 8]));
    r.append(2, 0, new Uint8Array([9, 10, 11, 12]));
    expect(r.bytes).toBe(10);
    const all = r.chunks.flatMap((c) => Array.from(c.bytes));
    expect(all).toEqual([3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(r.appended).toBe(12);
    expect(r.chunks.at(-1)!.end).toBe(12);
  });

  it("keeps only the tail of a chunk larger than the cap", () => {
    const r = new ConsoleRing(4);
    r.append(0, 0, new Uint8Array([1, 2, 3, 4, 5, 6]));
    expect(Array.from(r.chunks[0].bytes)).toEqual([3, 4, 5, 6]);
    expect(r.bytes).toBe(4);
  });

  it("clear empties and bumps the epoch; empty appends are ignored", () => {
    const r = new ConsoleRing(8);
    r.append(0, 0, new Uint8Array(0));
    expect(r.chunks).toHaveLength(0);
    r.append(0, 0, new Uint8Array([1]));
    r.clear();
    expect(r.chunks).toHaveLength(0);
    expect(r.bytes).toBe(0);
    expect(r.epoch).toBe(1);
  });

  it("holds 1 MiB by default", () => {
    const r = new ConsoleRing();
    for (let i = 0; i < 40; i++) r.append(i, 0, new Uint8Array(64 * 1024));
    expect(r.bytes).toBe(1 << 20);
  });
});

describe("RawRequests", () => {
  it("merges requests per dataset by taking the largest, by index", () => {
    const r = new RawRequests();
    const byId = new Map([["a", 0], ["b", 3]]);
    const offA = r.add("a", 1024);
    r.add("a", 256);
    r.add("b", 100);
    r.add("unknown", 50);
    expect(r.resolve(byId)).toEqual({ 0: 1024, 3: 100 });
    offA();
    expect(r.resolve(byId)).toEqual({ 0: 256, 3: 100 });
  });

  it("bumps its version on changes only, and ignores bad sizes", () => {
    const r = new RawRequests();
    const off = r.add("a", NaN);
    expect(r.version).toBe(1);
    expect(r.resolve(new Map([["a", 0]]))).toEqual({});
    off();
    off();
    expect(r.version).toBe(2);
  });
});
