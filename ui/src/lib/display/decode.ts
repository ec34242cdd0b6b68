/** Decodes binary display frames (docs/ui-protocol.md) into zero-copy Float64Array views. */

export const MAGIC = 0x31445853; // "SXD1" little-endian
export const HEADER_BYTES = 40;

export interface DatasetMeta {
  index: number;
  id: string;
  title: string;
  group: string;
  units: string;
  source: number | null;
}

export interface DatasetBlock {
  index: number;
  /** Newest value; NaN when none or text. */
  last: number;
  /** Visible window, decimated (min/max per bucket). */
  t: Float64Array;
  v: Float64Array;
  /** Newest samples, undecimated (only when asked for). */
  rawT: Float64Array;
  rawV: Float64Array;
}

export interface ConsoleRecord {
  t: number;
  source: number;
  bytes: Uint8Array;
}

export interface DisplayFrame {
  seq: number;
  /** Session seconds of the newest frame; NaN before the first. */
  now: number;
  /** Parsed frames since connect. */
  frames: number;
  /** Present when the dataset list changed (and in the first frame). */
  meta: DatasetMeta[] | null;
  text: Record<number, string>;
  datasets: DatasetBlock[];
  console: ConsoleRecord[];
}

export class FrameError extends Error {}

const pad8 = (n: number) => (n + 7) & ~7;
const utf8 = new TextDecoder();

/** JSON of a section; a parse error is the frame's fault, so it is a FrameError. */
function parseSection(bytes: Uint8Array, what: string): any {
  try {
    return JSON.parse(utf8.decode(bytes));
  } catch (e) {
    throw new FrameError(`display frame ${what} is not valid JSON: ${e instanceof Error ? e.message : e}`);
  }
}

const isText = (x: unknown) => typeof x === "string";
const isIndex = (x: unknown) => typeof x === "number" && Number.isInteger(x) && x >= 0;

/** One dataset's description, checked field by field: the store and every widget read
 * these fields without looking again. */
function isMeta(m: any): m is DatasetMeta {
  return (
    !!m &&
    typeof m === "object" &&
    isIndex(m.index) &&
    isText(m.id) &&
    isText(m.title) &&
    isText(m.group) &&
    isText(m.units) &&
    (m.source === null || isIndex(m.source))
  );
}

export function decodeFrame(buffer: ArrayBuffer): DisplayFrame {
  if (buffer.byteLength < HEADER_BYTES) throw new FrameError(`display frame too short (${buffer.byteLength} bytes)`);
  const view = new DataView(buffer);
  if (view.getUint32(0, true) !== MAGIC) throw new FrameError("not a display frame (bad magic)");
  const seq = view.getUint32(4, true);
  const now = view.getFloat64(8, true);
  const datasetCount = view.getUint32(16, true);
  const consoleCount = view.getUint32(20, true);
  const metaBytes = view.getUint32(24, true);
  const textBytes = view.getUint32(28, true);
  const frames = Number(view.getBigUint64(32, true));
  let at = HEADER_BYTES;
  const need = (bytes: number) => {
    if (at + bytes > buffer.byteLength) throw new FrameError(`display frame truncated at byte ${at}`);
  };
  let meta: DatasetMeta[] | null = null;
  if (metaBytes > 0) {
    need(metaBytes);
    const parsed = parseSection(new Uint8Array(buffer, at, metaBytes), "meta");
    if (!parsed || !Array.isArray(parsed.datasets)) throw new FrameError("display frame meta has no datasets list");
    const bad = parsed.datasets.findIndex((m: unknown) => !isMeta(m));
    if (bad >= 0) throw new FrameError(`display frame meta: dataset ${bad} is not a dataset description`);
    meta = parsed.datasets;
    at += pad8(metaBytes);
  }
  let text: Record<number, string> = {};
  if (textBytes > 0) {
    need(textBytes);
    const parsed = parseSection(new Uint8Array(buffer, at, textBytes), "text");
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new FrameError("display frame text is not an object");
    for (const [k, v] of Object.entries(parsed)) {
      if (!/^(0|[1-9][0-9]*)$/.test(k) || !isText(v)) throw new FrameError(`display frame text: entry "${k}" is not a dataset's text`);
    }
    text = parsed;
    at += pad8(textBytes);
  }
  const datasets: DatasetBlock[] = [];
  for (let i = 0; i < datasetCount; i++) {
    need(24);
    const index = view.getUint32(at, true);
    const n = view.getUint32(at + 4, true);
    const m = view.getUint32(at + 8, true);
    const last = view.getFloat64(at + 16, true);
    at += 24;
    need(8 * (2 * n + 2 * m));
    const col = (len: number) => {
      const a = new Float64Array(buffer, at, len);
      at += 8 * len;
      return a;
    };
    const t = col(n);
    const v = col(n);
    const rawT = col(m);
    const rawV = col(m);
    datasets.push({ index, last, t, v, rawT, rawV });
  }
  const consoleRecords: ConsoleRecord[] = [];
  for (let i = 0; i < consoleCount; i++) {
    need(16);
    const t = view.getFloat64(at, true);
    const source = view.getUint32(at + 8, true);
    const len = view.getUint32(at + 12, true);
    at += 16;
    need(len);
    consoleRecords.push({ t, source, bytes: new Uint8Array(buffer, at, len) });
    at += pad8(len);
  }
  return { seq, now, frames, meta, text, datasets, console: consoleRecords };
}

/** Builds a frame (the encoder's mirror), for tests and for the browser-only demo. */
export function encodeFrame(f: Omit<DisplayFrame, "datasets" | "console"> & {
  datasets: { index: number; last: number; t: number[]; v: number[]; rawT?: number[]; rawV?: number[] }[];
  console?: { t: number; source: number; bytes: Uint8Array }[];
}): ArrayBuffer {
  const enc = new TextEncoder();
  const meta = f.meta ? enc.encode(JSON.stringify({ datasets: f.meta })) : new Uint8Array();
  const text = Object.keys(f.text).length ? enc.encode(JSON.stringify(f.text)) : new Uint8Array();
  const cons = f.console ?? [];
  let size = HEADER_BYTES + pad8(meta.length) + pad8(text.length);
  for (const d of f.datasets) size += 24 + 8 * (2 * d.t.length + 2 * (d.rawT?.length ?? 0));
  for (const c of cons) size += 16 + pad8(c.bytes.length);
  const buf = new ArrayBuffer(size);
  const view = new DataView(buf);
  const bytes = new Uint8Array(buf);
  view.setUint32(0, MAGIC, true);
  view.setUint32(4, f.seq, true);
  view.setFloat64(8, f.now, true);
  view.setUint32(16, f.datasets.length, true);
  view.setUint32(20, cons.length, true);
  view.setUint32(24, meta.length, true);
  view.setUint32(28, text.length, true);
  view.setBigUint64(32, BigInt(f.frames), true);
  let at = HEADER_BYTES;
  bytes.set(meta, at);
  at += pad8(meta.length);
  bytes.set(text, at);
  at += pad8(text.length);
  for (const d of f.datasets) {
    const raw = d.rawT ?? [];
    view.setUint32(at, d.index, true);
    view.setUint32(at + 4, d.t.length, true);
    view.setUint32(at + 8, raw.length, true);
    view.setFloat64(at + 16, d.last, true);
    at += 24;
    for (const col of [d.t, d.v, raw, d.rawV ?? []]) {
      for (const x of col) {
        view.setFloat64(at, x, true);
        at += 8;
      }
    }
  }
  for (const c of cons) {
    view.setFloat64(at, c.t, true);
    view.setUint32(at + 8, c.source, true);
    view.setUint32(at + 12, c.bytes.length, true);
    at += 16;
    bytes.set(c.bytes, at);
    at += pad8(c.bytes.length);
  }
  return buf;
}
