// The connection state a person reads comes from the sources' own status: a run whose only
// source is reconnecting, or whose port does not exist, is not "Connected".
import { describe, expect, it } from "vitest";
import { connectOutcome, isLive, noDataHint, overall, quietSince, type IoStatus } from "../src/screens/status";

const run = (...statuses: string[]): IoStatus => ({
  connected: true,
  runningActions: [],
  replayEnded: false,
  sources: statuses.map((status, i) => ({
    id: `s${i}`, status, bytes: 0, chunks: 0, droppedChunks: 0, frames: 0, checksumFailed: 0, oversizeDropped: 0, parseErrors: 0,
  })),
});

describe("the overall connection state", () => {
  const cases: [string, IoStatus | null, string, boolean][] = [
    ["no run", { connected: false, sources: [], runningActions: [], replayEnded: false }, "disconnected", false],
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

describe("what a person reads while connecting and while quiet", () => {
  const live = (status: string, bytes = 0): IoStatus => ({
    connected: true,
    runningActions: [],
    replayEnded: false,
    sources: [{ id: "s", status, bytes, chunks: 0, droppedChunks: 0, frames: 0, checksumFailed: 0, oversizeDropped: 0, parseErrors: 0 }],
  });

  it.each([
    ["just started", null, true, "connect.connectingInfo", ""],
    ["connected", live("connected"), false, "connect.connectedInfo", "ok"],
    ["a port that does not exist", live("reconnecting (attempt 2, next try in 0.4 s): No such file or directory"), false, "connect.notConnectedInfo", "warn"],
    ["a configuration error", live("error: baud rate 0 is not valid"), false, "connect.failedInfo", "error"],
    ["still opening", live("connecting"), false, "connect.connectingInfo", ""],
    ["a replay at its end", live("finished"), false, "connect.finishedInfo", ""],
  ])("%s: %s", (_name, s, starting, key, tone) => {
    const o = connectOutcome(s, starting);
    expect(o.key).toBe(key);
    expect(o.tone).toBe(tone);
    if (key === "connect.notConnectedInfo" || key === "connect.failedInfo") expect(o.reason).toBeTruthy();
  });

  it("counts quiet seconds from the last byte, and says connected-but-quiet rather than connect a device", () => {
    let q = quietSince({ bytes: 0, sinceMs: 0 }, live("connected", 10), 1000);
    q = quietSince(q, live("connected", 10), 5000);
    expect(q).toEqual({ bytes: 10, sinceMs: 1000 });
    expect(noDataHint(live("connected", 10), q, 8000)).toEqual({ key: "dash.quiet", seconds: 7 });
    q = quietSince(q, live("connected", 12), 9000);
    expect(q.sinceMs).toBe(9000);
    expect(noDataHint(live("reconnecting: gone"), q, 9000).key).toBe("dash.connecting");
    expect(noDataHint({ connected: false, sources: [], runningActions: [], replayEnded: false }, q, 9000).key).toBe("dash.noData");
    expect(noDataHint(null, q, 9000).key).toBe("dash.noData");
  });

  it("a replay held at its end reads as ended, not as a connected device", () => {
    const ended = { ...live("connected"), replayEnded: true };
    expect(overall(ended)).toBe("finished");
    expect(isLive(overall(ended))).toBe(false);
    expect(noDataHint(ended, { bytes: 0, sinceMs: 1 }, 5000).key).toBe("dash.replayEnded");
    expect(connectOutcome(ended).key).toBe("connect.finishedInfo");
  });
});
