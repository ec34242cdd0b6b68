// The replay progress helpers of the Recording screen (screens/recording/progress.ts).
import { describe, expect, it } from "vitest";
import {
  POLL_IDLE_MS, POLL_PLAYING_MS, SPEEDS, clampPosition, parseReplayState, pollDelay, progressFraction, speedChoices,
} from "../src/screens/recording/progress";

describe("parseReplayState", () => {
  it("is null when nothing replays or the answer is not understood", () => {
    expect(parseReplayState({ replays: [] })).toBeNull();
    expect(parseReplayState(null)).toBeNull();
    expect(parseReplayState({})).toBeNull();
    expect(parseReplayState({ replays: "x" })).toBeNull();
    expect(parseReplayState({ replays: [null, 3] })).toBeNull();
  });

  it("reads one replay", () => {
    expect(parseReplayState({ replays: [{ paused: true, speed: 2, positionS: 12.5, durationS: 60 }] })).toEqual({
      paused: true, speed: 2, positionS: 12.5, durationS: 60, count: 1,
    });
  });

  it("is at its end only when every replay holds at its end", () => {
    const at = (a: boolean, b: boolean) =>
      parseReplayState({ replays: [{ paused: true, atEnd: a, positionS: 5, durationS: 5 }, { paused: true, atEnd: b, positionS: 2, durationS: 4 }] })?.atEnd;
    expect(at(true, true)).toBe(true);
    expect(at(true, false)).toBe(false);
  });

  it("folds several: paused only when all are, furthest position, longest duration, first speed", () => {
    const r = parseReplayState({
      replays: [
        { paused: true, speed: 0.5, positionS: 3, durationS: 10 },
        { paused: false, speed: 1, positionS: 4, durationS: 20 },
      ],
    });
    expect(r).toEqual({ paused: false, speed: 0.5, positionS: 4, durationS: 20, count: 2 });
  });

  it("clamps the position into the duration and copes with missing numbers", () => {
    expect(parseReplayState({ replays: [{ paused: false, speed: 1, positionS: 99, durationS: 30 }] })?.positionS).toBe(30);
    const r = parseReplayState({ replays: [{ paused: "yes", speed: -1, positionS: NaN, durationS: null }] });
    expect(r).toEqual({ paused: false, speed: 1, positionS: 0, durationS: null, count: 1 });
  });

  it("keeps speed 0 (as fast as possible)", () => {
    expect(parseReplayState({ replays: [{ paused: false, speed: 0, positionS: 1, durationS: 2 }] })?.speed).toBe(0);
  });
});

describe("clampPosition / progressFraction", () => {
  it("clamps", () => {
    expect(clampPosition(-1, 10)).toBe(0);
    expect(clampPosition(11, 10)).toBe(10);
    expect(clampPosition(11, null)).toBe(11);
    expect(clampPosition(Infinity, null)).toBe(0);
  });

  it("gives the played share", () => {
    expect(progressFraction(5, 10)).toBe(0.5);
    expect(progressFraction(15, 10)).toBe(1);
    expect(progressFraction(5, null)).toBe(0);
    expect(progressFraction(5, 0)).toBe(0);
    expect(progressFraction(-2, 10)).toBe(0);
  });
});

describe("pollDelay", () => {
  const p = { paused: false, speed: 1, positionS: 0, durationS: 1, count: 1 };
  it("polls quickly only while a replay plays", () => {
    expect(pollDelay(p)).toBe(POLL_PLAYING_MS);
    expect(pollDelay({ ...p, paused: true })).toBe(POLL_IDLE_MS);
    expect(pollDelay(null)).toBe(POLL_IDLE_MS);
    expect(POLL_PLAYING_MS).toBeLessThanOrEqual(250);
    expect(POLL_IDLE_MS).toBeGreaterThanOrEqual(1000);
  });
});

describe("speedChoices", () => {
  it("is the usual list when the speed is in it", () => {
    expect(speedChoices(1)).toEqual(SPEEDS);
    expect(speedChoices(0)).toEqual(SPEEDS);
  });

  it("adds an unusual speed in order, keeping 'as fast as possible' last", () => {
    const c = speedChoices(3);
    expect(c).toContain(3);
    expect(c.indexOf(3)).toBe(c.indexOf(2) + 1);
    expect(c.at(-1)).toBe(0);
    expect(c.length).toBe(SPEEDS.length + 1);
  });

  it("ignores nonsense", () => {
    expect(speedChoices(NaN)).toEqual(SPEEDS);
    expect(speedChoices(-2)).toEqual(SPEEDS);
  });
});
