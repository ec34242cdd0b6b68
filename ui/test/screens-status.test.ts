// The connection state a person reads comes from the sources' own status: a run whose only
// source is reconnecting, or whose port does not exist, is not "Connected".
import { describe, expect, it } from "vitest";
import { isLive, overall, type IoStatus } from "../src/screens/status";

const run = (...statuses: string[]): IoStatus => ({
  connected: true,
  sources: statuses.map((status, i) => ({
    id: `s${i}`, status, bytes: 0, chunks: 0, droppedChunks: 0, frames: 0, checksumFailed: 0, oversizeDropped: 0, parseErrors: 0,
  })),
});

describe("the overall connection state", () => {
  const cases: [string, IoStatus | null, string, boolean][] = [
    ["no run", { connected: false, sources: [] }, "disconnected", false],
    ["no answer yet", null, "disconnected", false],
    ["every source up", run("connected", "connected"), "connected", true],
    ["one of two up", run("connected", "reconnecting (attempt 2, next try in 1.0 s): port gone"), "partly", true],
    ["only source retrying", run("reconnecting (attempt 3, next try in 4.0 s): no such file /dev/ttyUSB9"), "reconnecting", false],
    ["port does not exist", run("error: could not open /dev/ttyUSB9: No such file or directory"), "error", false],
    ["still opening", run("connecting", "error: refused"), "connecting", false],
    ["a replay that ended", run("finished"), "finished", false],
  ];
  for (const [what, status, want, live] of cases) {
    it(what, () => {
      expect(overall(status)).toBe(want);
      expect(isLive(overall(status))).toBe(live);
    });
  }
});
