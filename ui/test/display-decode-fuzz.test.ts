import { describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame, FrameError, HEADER_BYTES, MAGIC, type DisplayFrame } from "../src/lib/display/decode";
import { LiveStore } from "../src/lib/display/store";

/** A small deterministic generator (mulberry32): the same inputs on every run, so a
 * failure names its case and reproduces. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function valid(random: () => number): ArrayBuffer {
  const n = Math.floor(random() * 4);
  return encodeFrame({
    seq: Math.floor(random() * 1000),
    now: random() * 100,
    frames: Math.floor(random() * 1e6),
    meta: random() < 0.5 ? [{ index: 0, id: "a", title: "T", group: "G", units: "V", source: 0 }] : null,
    text: random() < 0.5 ? { 0: "on" } : {},
    datasets: Array.from({ length: n }, (_, i) => {
      const k = Math.floor(random() * 4);
      return { index: i, last: random(), t: [1, 2, 3].slice(0, k), v: [4, 5, 6].slice(0, k) };
    }),
    console: random() < 0.5 ? [{ t: 1, source: 0, bytes: new Uint8Array([65, 10]) }] : [],
  });
}

/** Ways a frame goes bad on the wire: flipped bits, a cut, a header count or length
 * replaced, a JSON section garbled, or bytes that were never a frame. */
function broken(random: () => number): ArrayBuffer {
  const pick = Math.floor(random() * 6);
  if (pick === 0) {
    const bytes = new Uint8Array(Math.floor(random() * 200));
    for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(random() * 256);
    if (bytes.length >= 4 && random() < 0.7) new DataView(bytes.buffer).setUint32(0, MAGIC, true);
    return bytes.buffer;
  }
  const bytes = new Uint8Array(valid(random).slice(0));
  const view = new DataView(bytes.buffer);
  if (pick === 1) {
    for (let k = 0; k < 1 + random() * 8; k++) {
      const at = HEADER_BYTES + Math.floor(random() * Math.max(1, bytes.length - HEADER_BYTES));
      if (at < bytes.length) bytes[at] ^= 1 << Math.floor(random() * 8);
    }
    return bytes.buffer;
  }
  if (pick === 2) return bytes.buffer.slice(0, Math.floor(random() * bytes.length));
  if (pick === 3) {
    const field = [16, 20, 24, 28][Math.floor(random() * 4)];
    const values = [0, 1, 7, 0xffffffff, 0x7fffffff, Math.floor(random() * 4096)];
    view.setUint32(field, values[Math.floor(random() * values.length)], true);
    return bytes.buffer;
  }
  if (pick === 4) {
    // A meta or text section whose JSON parses but is not what it should be.
    const json = [
      '{"datasets":[null]}',
      '{"datasets":[1,2]}',
      '{"datasets":[{"index":-1,"id":"a","title":"","group":"","units":"","source":null}]}',
      '{"datasets":[{"index":0,"id":5,"title":"","group":"","units":"","source":null}]}',
      '{"datasets":"no"}',
      '{"0":{"toString":1}}',
      '{"x":"y"}',
      '{"__proto__":"z"}',
      "[]",
      "null",
    ][Math.floor(random() * 10)];
    const body = new TextEncoder().encode(json);
    const size = HEADER_BYTES + ((body.length + 7) & ~7);
    const out = new Uint8Array(size);
    out.set(bytes.subarray(0, HEADER_BYTES));
    const v = new DataView(out.buffer);
    v.setUint32(16, 0, true);
    v.setUint32(20, 0, true);
    const asMeta = json.startsWith('{"datasets"') || random() < 0.5;
    v.setUint32(24, asMeta ? body.length : 0, true);
    v.setUint32(28, asMeta ? 0 : body.length, true);
    out.set(body, HEADER_BYTES);
    return out.buffer;
  }
  bytes[Math.floor(random() * Math.min(bytes.length, HEADER_BYTES))] = Math.floor(random() * 256);
  return bytes.buffer;
}

/** Everything the store and the widgets read from a frame is of its declared type. */
function wellTyped(f: DisplayFrame) {
  expect(Number.isInteger(f.seq)).toBe(true);
  expect(typeof f.now).toBe("number");
  for (const m of f.meta ?? []) {
    expect(Number.isInteger(m.index) && m.index >= 0).toBe(true);
    for (const s of [m.id, m.title, m.group, m.units]) expect(typeof s).toBe("string");
    expect(m.source === null || Number.isInteger(m.source)).toBe(true);
  }
  for (const [k, v] of Object.entries(f.text)) {
    expect(String(Number(k))).toBe(k);
    expect(typeof v).toBe("string");
  }
  for (const d of f.datasets) {
    expect(d.t.length).toBe(d.v.length);
    expect(d.rawT.length).toBe(d.rawV.length);
  }
  for (const c of f.console) expect(c.bytes).toBeInstanceOf(Uint8Array);
}

describe("display frames from a hostile or broken wire", () => {
  it("20 000 broken frames: each decodes well typed or fails as a FrameError, and the store never throws", () => {
    const random = rng(0x5eed);
    const store = new LiveStore();
    let decoded = 0;
    let refused = 0;
    for (let i = 0; i < 20_000; i++) {
      const buffer = broken(random);
      let frame: DisplayFrame | undefined;
      try {
        frame = decodeFrame(buffer);
      } catch (e) {
        if (!(e instanceof FrameError)) throw new Error(`case ${i}: ${e} escaped the decoder`);
        refused++;
      }
      if (frame) {
        decoded++;
        wellTyped(frame);
      }
      expect(() => store.ingest(buffer), `case ${i}`).not.toThrow();
    }
    // Both outcomes were exercised, so the generator reached past the header checks.
    expect(decoded).toBeGreaterThan(1000);
    expect(refused).toBeGreaterThan(1000);
    expect(store.badFrames).toBe(refused);
  });

  it("a meta list with a non-description is refused whole, naming the dataset", () => {
    const body = new TextEncoder().encode('{"datasets":[{"index":0,"id":"a","title":"","group":"","units":"","source":null},null]}');
    const out = new Uint8Array(HEADER_BYTES + ((body.length + 7) & ~7));
    const v = new DataView(out.buffer);
    v.setUint32(0, MAGIC, true);
    v.setUint32(24, body.length, true);
    out.set(body, HEADER_BYTES);
    expect(() => decodeFrame(out.buffer)).toThrow(/dataset 1 is not a dataset description/);
  });
});
