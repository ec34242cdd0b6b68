import { describe, expect, it } from "vitest";
import { along, fillTrail, rangeOf } from "../src/widgets/math/trail3d";

describe("rangeOf", () => {
  it("ignores NaN and widens a flat or empty range", () => {
    expect(rangeOf([3, NaN, -1, 2], 0, 4)).toEqual({ lo: -1, hi: 3 });
    expect(rangeOf([5, 5, 5], 0, 3)).toEqual({ lo: 4, hi: 6 });
    expect(rangeOf([NaN], 0, 1)).toEqual({ lo: -1, hi: 1 });
    expect(rangeOf([1, 2, 3, 4], 2, 2)).toEqual({ lo: 3, hi: 4 });
  });
});

describe("fillTrail", () => {
  it("fits each axis to its own range, aligned at the newest samples", () => {
    // x in mV, y in km, z flat: each still spans the cube.
    const x = [0, 1000, 2000, 3000];
    const y = [99, 0.001, 0.002, 0.003]; // one sample longer than the others' ends
    const z = [7, 7, 7];
    const out = new Float32Array(3 * 8);
    const { points, ranges } = fillTrail(x, y, z, 8, out);
    expect(points).toBe(3);
    expect(ranges[0]).toEqual({ lo: 1000, hi: 3000 });
    expect(ranges[1].lo).toBeCloseTo(0.001);
    expect(ranges[2]).toEqual({ lo: 6, hi: 8 });
    expect(Array.from(out.slice(0, 9)).map((v) => +v.toFixed(4))).toEqual([-1, -1, 0, 0, 0, 0, 1, 1, 0]);
  });

  it("keeps to n and to what out holds, and skips samples where an axis is NaN", () => {
    const x = [1, 2, 3, 4, 5], y = [1, NaN, 3, 4, 5], z = [1, 2, 3, 4, 5];
    const out = new Float32Array(3 * 3);
    expect(fillTrail(x, y, z, 10, out).points).toBe(3);
    const out2 = new Float32Array(3 * 10);
    expect(fillTrail(x, y, z, 4, out2).points).toBe(3);
    expect(fillTrail([], [], [], 10, out2).points).toBe(0);
  });

  it("labels an axis along its range", () => {
    expect(along({ lo: -2, hi: 6 }, 0.25)).toBe(0);
  });
});
