import { describe, expect, it } from "vitest";
import { Peaks, TriggerState, findEdge, logRange, positiveOnly, sliceWindow, type TriggerSettings } from "../src/widgets/scope";

/** A square wave of period 1 s between -1 and 1 (rising at whole seconds), sampled every
 *  `dt` from `t0` to `t1`. */
function square(t0: number, t1: number, dt = 0.01) {
  const t: number[] = [], v: number[] = [];
  for (let x = t0; x <= t1 + 1e-9; x += dt) {
    t.push(+x.toFixed(6));
    v.push(x - Math.floor(x) < 0.5 ? 1 : -1);
  }
  return { t: Float64Array.from(t), v: Float64Array.from(v) };
}

describe("findEdge", () => {
  const t = [0, 1, 2, 3, 4, 5];
  const v = [0, 2, 0, 2, 0, 2];
  it("finds the latest crossing in its direction, interpolated", () => {
    expect(findEdge(t, v, 1, "rising", -Infinity, Infinity)).toBeCloseTo(4.5);
    expect(findEdge(t, v, 1, "falling", -Infinity, Infinity)).toBeCloseTo(3.5);
    expect(findEdge(t, v, 0.5, "rising", -Infinity, Infinity)).toBeCloseTo(4.25);
  });
  it("keeps within earliest and latest", () => {
    expect(findEdge(t, v, 1, "rising", -Infinity, 4)).toBeCloseTo(2.5);
    expect(findEdge(t, v, 1, "rising", 3, 4)).toBeNaN();
    expect(findEdge(t, v, 1, "rising", 0.5, 0.5)).toBeCloseTo(0.5);
  });
  it("counts a sample on the level once and never crosses a gap", () => {
    expect(findEdge([0, 1, 2, 3], [0, 1, 1, 2], 1, "rising", -Infinity, Infinity)).toBe(1);
    expect(findEdge([0, 1, 2], [0, NaN, 2], 1, "rising", -Infinity, Infinity)).toBeNaN();
    expect(findEdge([0, 1], [5, 5], 1, "rising", -Infinity, Infinity)).toBeNaN();
    expect(findEdge([], [], 1, "rising", -Infinity, Infinity)).toBeNaN();
  });
});

describe("TriggerState", () => {
  const span = 1;
  it("auto: holds each new edge with the pre-trigger share before it, and rolls when edges stop", () => {
    const s: TriggerSettings = { level: 0, edge: "rising", preTrigger: 0.25, mode: "auto" };
    const state = new TriggerState();
    const a = square(0, 4.3);
    let r = state.update(s, a.t, a.v, 4.3, span);
    // The latest rising edge with 0.75 s of data after it: the one at 3 s (4 is too late).
    expect(r.moved).toBe(true);
    expect(r.view.state).toBe("triggered");
    expect(r.view.at).toBeCloseTo(3, 1);
    expect(r.view.window![0]).toBeCloseTo(r.view.at - 0.25);
    expect(r.view.window![1]).toBeCloseTo(r.view.at + 0.75);
    // More data: the edge at 4 s now has room after it.
    const b = square(0, 4.8);
    r = state.update(s, b.t, b.v, 4.8, span);
    expect(r.moved).toBe(true);
    expect(r.view.at).toBeCloseTo(4, 1);
    // The same data again: nothing new.
    expect(state.update(s, b.t, b.v, 4.8, span).moved).toBe(false);
    // A flat signal for longer than a span: auto rolls live again.
    const flat = { t: Float64Array.from([4.8, 5.5, 6.5]), v: Float64Array.from([-1, -1, -1]) };
    r = state.update(s, flat.t, flat.v, 6.5, span);
    expect(r.view.state).toBe("rolling");
    expect(r.view.window).toBeNull();
  });

  it("normal: keeps the last window when the edges stop; waits before the first", () => {
    const s: TriggerSettings = { level: 0, mode: "normal" };
    const state = new TriggerState();
    const flat = { t: Float64Array.from([0, 1, 2]), v: Float64Array.from([-1, -1, -1]) };
    expect(state.update(s, flat.t, flat.v, 2, span).view.state).toBe("waiting");
    const a = square(0, 3.6);
    const held = state.update(s, a.t, a.v, 3.6, span).view;
    expect(held.state).toBe("triggered");
    const later = { t: Float64Array.from([3.6, 6, 9]), v: Float64Array.from([-1, -1, -1]) };
    const r = state.update(s, later.t, later.v, 9, span).view;
    expect(r.state).toBe("triggered");
    expect(r.window).toEqual(held.window);
  });

  it("single: holds the first edge, ignores the next ones until armed again", () => {
    const s: TriggerSettings = { level: 0, mode: "single", preTrigger: 0.5 };
    const state = new TriggerState();
    const a = square(0, 2.6);
    let r = state.update(s, a.t, a.v, 2.6, span);
    expect(r.view.state).toBe("triggered");
    const first = r.view.at;
    const b = square(0, 6.6);
    r = state.update(s, b.t, b.v, 6.6, span);
    expect(r.moved).toBe(false);
    expect(r.view.at).toBe(first);
    state.arm(6.6);
    r = state.update(s, b.t, b.v, 6.6, span);
    expect(r.view.state).toBe("armed");
    expect(r.view.at).toBe(first);
    const c = square(0, 8.6);
    r = state.update(s, c.t, c.v, 8.6, span);
    expect(r.moved).toBe(true);
    expect(r.view.state).toBe("triggered");
    expect(r.view.at).toBeGreaterThan(6.6);
  });

  it("a falling edge and a level the signal never reaches", () => {
    const a = square(0, 3.6);
    const falling = new TriggerState().update({ level: 0, edge: "falling", preTrigger: 0 }, a.t, a.v, 3.6, span).view;
    expect(falling.at % 1).toBeCloseTo(0.5, 1);
    const never = new TriggerState().update({ level: 5 }, a.t, a.v, 3.6, span).view;
    expect(never.state).toBe("rolling");
  });
});

describe("peaks and log axes", () => {
  it("peaks keep the extremes of what was shown", () => {
    const p = new Peaks();
    expect(p.any).toBe(false);
    p.add([0, 1, 2, 3], [1, NaN, -4, 9], 0, 2);
    expect([p.lo, p.hi]).toEqual([-4, 1]);
    p.add([5], [3]);
    expect([p.lo, p.hi]).toEqual([-4, 3]);
    p.reset();
    expect(p.any).toBe(false);
  });

  it("a log axis spans whole decades of the positive values", () => {
    expect(logRange([0, 1, 2], [[0.5, 3, -2]])).toEqual([0.1, 10]);
    expect(logRange([0, 1], [[100, 100]])).toEqual([100, 1000]);
    expect(logRange([0, 1], [[0, -1]])).toEqual([1, 10]);
    expect(Array.from(positiveOnly(new Float64Array(3), [2, 0, -1]))).toEqual([2, NaN, NaN]);
  });

  it("a window's slice reaches one sample past each edge", () => {
    const x = Float64Array.from([0, 1, 2, 3, 4]);
    const [sx, sy] = sliceWindow(x, [Float64Array.from([10, 11, 12, 13, 14])], 1.5, 2.5);
    expect(Array.from(sx)).toEqual([1, 2, 3]);
    expect(Array.from(sy)).toEqual([11, 12, 13]);
  });
});
