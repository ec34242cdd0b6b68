import { describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame, FrameError, HEADER_BYTES } from "../src/lib/display/decode";

const meta = [
  { index: 0, id: "ds-1", title: "Temperature", group: "Env", units: "°C", source: 0 },
  { index: 1, id: "ds-2", title: "Name", group: "Env", units: "", source: 0 },
];

function sample() {
  return encodeFrame({
    seq: 7,
    now: 12.5,
    frames: 123456789012,
    meta,
    text: { 1: "hello wörld" },
    datasets: [
      { index: 0, last: 3, t: [1, 2, 3], v: [10, 20, 30], rawT: [2.5, 3], rawV: [25, 30] },
      { index: 1, last: NaN, t: [], v: [] },
    ],
    console: [{ t: 1.25, source: 0, bytes: new Uint8Array([72, 105, 10]) }],
  });
}

describe("display frame decoding", () => {
  it("round-trips every section", () => {
    const f = decodeFrame(sample());
    expect(f.seq).toBe(7);
    expect(f.now).toBe(12.5);
    expect(f.frames).toBe(123456789012);
    expect(f.meta).toEqual(meta);
    expect(f.text).toEqual({ 1: "hello wörld" });
    expect(f.datasets).toHaveLength(2);
    expect(Array.from(f.datasets[0].t)).toEqual([1, 2, 3]);
    expect(Array.from(f.datasets[0].v)).toEqual([10, 20, 30]);
    expect(Array.from(f.datasets[0].rawT)).toEqual([2.5, 3]);
    expect(Array.from(f.datasets[0].rawV)).toEqual([25, 30]);
    expect(f.datasets[0].last).toBe(3);
    expect(Number.isNaN(f.datasets[1].last)).toBe(true);
    expect(f.datasets[1].t.length).toBe(0);
    expect(f.console).toHaveLength(1);
    expect(f.console[0].t).toBe(1.25);
    expect(Array.from(f.console[0].bytes)).toEqual([72, 105, 10]);
  });

  it("reads columns as zero-copy views on 8-byte boundaries", () => {
    const buf = sample();
    const f = decodeFrame(buf);
    for (const d of f.datasets) {
      expect(d.t.buffer).toBe(buf);
      expect(d.t.byteOffset % 8).toBe(0);
      expect(d.rawV.byteOffset % 8).toBe(0);
    }
  });

  it("keeps meta null and text empty when the frame has none", () => {
    const f = decodeFrame(encodeFrame({ seq: 0, now: NaN, frames: 0, meta: null, text: {}, datasets: [] }));
    expect(f.meta).toBeNull();
    expect(f.text).toEqual({});
    expect(Number.isNaN(f.now)).toBe(true);
  });

  it("rejects short, foreign and truncated buffers with FrameError", () => {
    expect(() => decodeFrame(new ArrayBuffer(10))).toThrow(FrameError);
    const junk = new Uint8Array(64).fill(0x41);
    expect(() => decodeFrame(junk.buffer)).toThrow(/magic/);
    const full = sample();
    // Every cut into data must be reported, never read past the end. (The last record is
    // 3 bytes padded to 8: cutting 6 bytes removes one of its data bytes.)
    for (const cut of [HEADER_BYTES + 4, HEADER_BYTES + 100, full.byteLength - 6, full.byteLength - 9, full.byteLength - 30]) {
      expect(() => decodeFrame(full.slice(0, cut)), `cut at ${cut}`).toThrow(FrameError);
    }
  });

  it("rejects a header claiming absurd counts", () => {
    const buf = sample();
    new DataView(buf).setUint32(16, 0xffffffff, true);
    expect(() => decodeFrame(buf)).toThrow(FrameError);
    const buf2 = sample();
    // A window length whose byte size overflows 32 bits must not wrap around.
    const view = new DataView(buf2);
    const metaLen = view.getUint32(24, true);
    const textLen = view.getUint32(28, true);
    const at = HEADER_BYTES + ((metaLen + 7) & ~7) + ((textLen + 7) & ~7);
    view.setUint32(at + 4, 0x20000000, true);
    expect(() => decodeFrame(buf2)).toThrow(FrameError);
  });

  it("reports bad meta JSON as FrameError", () => {
    const buf = sample();
    new Uint8Array(buf)[HEADER_BYTES] = 0x7b + 1; // corrupt the opening brace
    expect(() => decodeFrame(buf)).toThrow(FrameError);
  });
});

it("rejects meta without a datasets list and text that is not an object", () => {
  const enc = new TextEncoder();
  const build = (metaJson: string, textJson: string) => {
    const m = enc.encode(metaJson), t = enc.encode(textJson);
    const pad = (n: number) => (n + 7) & ~7;
    const buf = new ArrayBuffer(HEADER_BYTES + pad(m.length) + pad(t.length));
    const v = new DataView(buf);
    v.setUint32(0, 0x31445853, true);
    v.setUint32(24, m.length, true);
    v.setUint32(28, t.length, true);
    new Uint8Array(buf).set(m, HEADER_BYTES);
    new Uint8Array(buf).set(t, HEADER_BYTES + pad(m.length));
    return buf;
  };
  expect(() => decodeFrame(build('{"other":1}', ""))).toThrow(FrameError);
  expect(() => decodeFrame(build('{"datasets":[]}', "[1]"))).toThrow(FrameError);
  expect(decodeFrame(build('{"datasets":[]}', '{"0":"x"}')).text).toEqual({ 0: "x" });
});
