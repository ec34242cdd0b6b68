import { describe, expect, it } from "vitest";
import { KNOB_START, KNOB_SWEEP, SendPacer, knobAngle, knobDrag, snap } from "../src/widgets/controls";

describe("snap", () => {
  const cases: [number, { min: number; max: number; step: number }, number][] = [
    [0.30000000000000004, { min: 0, max: 1, step: 0.1 }, 0.3],
    [0.74, { min: 0, max: 1, step: 0.25 }, 0.75],
    [-5, { min: 0, max: 10, step: 1 }, 0],
    [12, { min: 0, max: 10, step: 1 }, 10],
    [9.9, { min: 0, max: 10, step: 3 }, 9],
    [10, { min: 0, max: 10, step: 3 }, 9],
    [1.26, { min: 1.05, max: 2, step: 0.1 }, 1.25],
    [NaN, { min: -3, max: 3, step: 1 }, -3],
    [2.5, { min: 0, max: 5, step: 0 }, 2.5],
    [0.000021, { min: 0, max: 0.0001, step: 1e-5 }, 0.00002],
  ];
  it.each(cases)("%s on %o is %s", (v, r, want) => expect(snap(v, r)).toBe(want));
});

describe("knob", () => {
  const r = { min: -10, max: 10, step: 0.5 };
  it("sweeps 270° from min to max and clamps outside", () => {
    expect(knobAngle(-10, r)).toBeCloseTo(KNOB_START);
    expect(knobAngle(10, r)).toBeCloseTo(KNOB_START + KNOB_SWEEP);
    expect(knobAngle(0, r)).toBeCloseTo(KNOB_START + KNOB_SWEEP / 2);
    expect(knobAngle(99, r)).toBeCloseTo(KNOB_START + KNOB_SWEEP);
  });
  it("a drag up raises it, its whole range over the span, on its steps", () => {
    expect(knobDrag(0, -100, r)).toBe(10);
    expect(knobDrag(0, 50, r)).toBe(-5);
    expect(knobDrag(0, -7, r)).toBe(0.5);
    expect(knobDrag(9, -300, r)).toBe(10);
  });
});

describe("SendPacer", () => {
  /** A pacer on a clock the test moves, whose sends finish when the test says. */
  function rig(minMs = 100) {
    let now = 0;
    const sent: number[] = [];
    const finish: (() => void)[] = [];
    const pacer = new SendPacer<number>(
      (v) => {
        sent.push(v);
        return new Promise<void>((r) => finish.push(r));
      },
      minMs,
      () => now,
    );
    return { pacer, sent, finish, tick: (ms: number) => (now += ms) };
  }
  const settle = () => new Promise((r) => setTimeout(r, 0));

  it("sends one at a time and then the newest value waiting", async () => {
    const { pacer, sent, finish, tick } = rig(0);
    pacer.push(1);
    pacer.push(2);
    pacer.push(3);
    expect(sent).toEqual([1]);
    tick(10);
    finish.shift()!();
    await settle();
    expect(sent).toEqual([1, 3]);
    finish.shift()!();
    await settle();
    expect(pacer.idle).toBe(true);
  });

  it("keeps minMs between sends and still sends the last value", async () => {
    const sent: number[] = [];
    const pacer = new SendPacer<number>(async (v) => void sent.push(v), 30);
    pacer.push(1);
    await settle();
    pacer.push(2);
    pacer.push(5);
    // Under 30 ms since the first: the next send waits for its timer, with the newest value.
    expect(sent).toEqual([1]);
    expect(pacer.idle).toBe(false);
    await new Promise((r) => setTimeout(r, 60));
    expect(sent).toEqual([1, 5]);
  });

  it("a failed send does not stop the next", async () => {
    let n = 0;
    const sent: number[] = [];
    const pacer = new SendPacer<number>((v) => {
      sent.push(v);
      return n++ === 0 ? Promise.reject(new Error("unplugged")) : Promise.resolve();
    }, 0);
    pacer.push(1);
    pacer.push(2);
    await settle();
    await settle();
    expect(sent).toEqual([1, 2]);
  });
});
