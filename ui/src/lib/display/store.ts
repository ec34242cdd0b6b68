/** The live data model behind the dashboard, free of Svelte, timers and transports so it can
 *  be tested: newest window per dataset, dataset meta (index ↔ id), text values, a bounded
 *  console buffer, and the merged raw-sample requests of mounted widgets. */
import { decodeFrame, type DatasetBlock, type DatasetMeta } from "./decode";

export interface ConsoleChunk {
  t: number;
  source: number;
  bytes: Uint8Array;
  /** `appended` right after this chunk: views render the chunks past what they showed. */
  end: number;
}

/** Received console bytes, oldest first, capped at `capBytes` (oldest bytes dropped first). */
export class ConsoleRing {
  chunks: ConsoleChunk[] = [];
  bytes = 0;
  /** Bytes ever appended (monotonic, survives trimming) so views can render incrementally. */
  appended = 0;
  /** Bumped by clear(), so views know to start over. */
  epoch = 0;

  constructor(readonly capBytes = 1 << 20) {}

  append(t: number, source: number, data: Uint8Array) {
    if (data.length === 0) return;
    // Copy: `data` is a view on the whole frame buffer, which must not be kept alive.
    const bytes = data.length > this.capBytes ? data.slice(data.length - this.capBytes) : data.slice();
    this.appended += data.length;
    this.chunks.push({ t, source, bytes, end: this.appended });
    this.bytes += bytes.length;
    while (this.bytes > this.capBytes) {
      const first = this.chunks[0];
      const excess = this.bytes - this.capBytes;
      if (first.bytes.length <= excess) {
        this.chunks.shift();
        this.bytes -= first.bytes.length;
      } else {
        first.bytes = first.bytes.subarray(excess);
        this.bytes -= excess;
      }
    }
  }

  clear() {
    this.chunks = [];
    this.bytes = 0;
    this.epoch++;
  }
}

/** Raw-sample requests from mounted widgets, by dataset id; merged by taking the largest. */
export class RawRequests {
  private entries = new Map<number, { id: string; n: number }>();
  private nextKey = 1;
  /** Bumped on every change, so the subscriber knows to re-send its options. */
  version = 0;

  add(id: string, n: number): () => void {
    const key = this.nextKey++;
    this.entries.set(key, { id, n: Math.max(0, Math.floor(Number.isFinite(n) ? n : 0)) });
    this.version++;
    return () => {
      if (this.entries.delete(key)) this.version++;
    };
  }

  /** Dataset index → samples, for the ids the meta knows (others wait for their meta). */
  resolve(byId: Map<string, number>): Record<number, number> {
    const out: Record<number, number> = {};
    for (const { id, n } of this.entries.values()) {
      const index = byId.get(id);
      if (index === undefined || n <= 0) continue;
      out[index] = Math.max(out[index] ?? 0, n);
    }
    return out;
  }
}

export class LiveStore {
  meta: DatasetMeta[] = [];
  byId = new Map<string, number>();
  byIndex = new Map<number, DatasetMeta>();
  blocks = new Map<number, DatasetBlock>();
  text = new Map<number, string>();
  console: ConsoleRing;
  /** Session time of the newest frame. */
  now = NaN;
  lastSeq = -1;
  framesReceived = 0;
  /** Parsed device frames since connect, as the backend counts them. */
  deviceFrames = 0;
  badFrames = 0;
  lastError = "";
  /** Bumped by every accepted frame; drawers compare it with what they last drew. */
  version = 0;
  /** Bumped when the dataset list changes. */
  metaVersion = 0;

  constructor(consoleCap = 1 << 20) {
    this.console = new ConsoleRing(consoleCap);
  }

  /** Decodes and applies one binary frame; bad frames are counted, never thrown. */
  ingest(buffer: ArrayBuffer): boolean {
    let frame;
    try {
      frame = decodeFrame(buffer);
    } catch (e) {
      this.badFrames++;
      this.lastError = e instanceof Error ? e.message : String(e);
      return false;
    }
    this.framesReceived++;
    this.lastSeq = frame.seq;
    this.now = frame.now;
    this.deviceFrames = frame.frames;
    if (frame.meta) this.setMeta(frame.meta);
    // Each frame carries each dataset's whole visible window: the newest replaces the old.
    for (const block of frame.datasets) {
      this.blocks.set(block.index, block);
      if (Number.isFinite(block.last)) this.text.delete(block.index);
    }
    for (const [k, v] of Object.entries(frame.text)) this.text.set(Number(k), String(v));
    for (const c of frame.console) this.console.append(c.t, c.source, c.bytes);
    this.version++;
    return true;
  }

  setMeta(meta: DatasetMeta[]) {
    this.meta = Array.isArray(meta) ? meta : [];
    this.byId.clear();
    this.byIndex.clear();
    for (const m of this.meta) {
      this.byId.set(String(m.id), m.index);
      this.byIndex.set(m.index, m);
    }
    // Windows of datasets that no longer exist must not be drawn under a new owner.
    for (const index of [...this.blocks.keys()]) if (!this.byIndex.has(index)) this.blocks.delete(index);
    for (const index of [...this.text.keys()]) if (!this.byIndex.has(index)) this.text.delete(index);
    this.metaVersion++;
  }

  block(id: string): DatasetBlock | undefined {
    const index = this.byId.get(id);
    return index === undefined ? undefined : this.blocks.get(index);
  }

  /** Newest numeric value of a dataset, NaN when none. */
  value(id: string): number {
    return this.block(id)?.last ?? NaN;
  }

  textOf(id: string): string | undefined {
    const index = this.byId.get(id);
    return index === undefined ? undefined : this.text.get(index);
  }
}
