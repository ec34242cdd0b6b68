import { describe, expect, it } from "vitest";
import { DbRange, colormap, level, paintRow, type ColormapName } from "../src/widgets/math/colormap";

/** Reference colours of each map at 0, ½ and 1 (matplotlib's viridis and inferno, Google's
 *  turbo table), and how close the tables must come: turbo is the published polynomial
 *  approximation, which strays most at its dark blue end. */
const TOLERANCE: Record<ColormapName, number> = { viridis: 2, inferno: 2, gray: 0, turbo: 35 };
const REFERENCE: Record<ColormapName, [number, number, number][]> = {
  viridis: [[68, 1, 84], [33, 145, 140], [253, 231, 37]],
  inferno: [[0, 0, 4], [188, 55, 84], [252, 255, 164]],
  turbo: [[48, 18, 59], [164, 252, 60], [122, 4, 3]],
  gray: [[0, 0, 0], [128, 128, 128], [255, 255, 255]],
};

describe("colormap", () => {
  for (const [name, refs] of Object.entries(REFERENCE) as [ColormapName, [number, number, number][]][]) {
    it(`${name} matches its reference at the ends and the middle`, () => {
      const t = colormap(name);
      expect(t.length).toBe(768);
      [0, 128, 255].forEach((i, k) => {
        const got = [t[3 * i], t[3 * i + 1], t[3 * i + 2]];
        got.forEach((v, ch) => expect(Math.abs(v - refs[k][ch]), `${name}[${i}] = ${got} vs ${refs[k]}`).toBeLessThanOrEqual(TOLERANCE[name]));
      });
    });
  }
  it("viridis and inferno grow brighter all the way up", () => {
    for (const name of ["viridis", "inferno", "gray"] as const) {
      const t = colormap(name);
      const lum = (i: number) => 0.2126 * t[3 * i] + 0.7152 * t[3 * i + 1] + 0.0722 * t[3 * i + 2];
      for (let i = 8; i < 256; i += 8) expect(lum(i), `${name} at ${i}`).toBeGreaterThan(lum(i - 8));
    }
  });
});

describe("DbRange", () => {
  it("rises at once to a louder row and falls back slowly", () => {
    const r = new DbRange(60, 0.5);
    expect(r.update(-20)).toEqual([-80, -20]);
    expect(r.update(0)).toEqual([-60, 0]);
    expect(r.update(-40)).toEqual([-80, -20]);
    expect(r.update(NaN)).toEqual([-80, -20]);
  });
});

describe("paintRow", () => {
  it("keeps a one-bin peak when many bins share a pixel", () => {
    const db = new Float64Array(1024).fill(-100);
    db[700] = 0;
    const out = new Uint8ClampedArray(4 * 16);
    const gray = colormap("gray");
    paintRow(db, 1, 1024, -100, 0, gray, out, 16);
    const lit = [];
    for (let x = 0; x < 16; x++) if (out[4 * x] === 255) lit.push(x);
    expect(lit).toEqual([Math.floor(((700 - 1) * 16) / 1023)]);
    expect(level(-50, -100, 0)).toBe(128);
    expect(level(NaN, -100, 0)).toBe(0);
  });
});
