// Axis and readout numbers keep the sign of negative values (the FFT's "−237.5" read
// "237.5": its y axis was a fixed 44 px, and the label's minus fell off the canvas).
import { describe, expect, it } from "vitest";
import { MINUS, formatValue } from "../src/widgets/math/scale";
import { axisWidth, formatTick, placeLabels, stepDecimals, tickLabels } from "../src/widgets/math/ticks";

/** A stand-in for measureText: ~6.5 px a character at 12 px. */
const measure = (s: string) => s.length * 6.5;

describe("formatValue (readouts, gauge and legend values)", () => {
  it.each([
    [-237.5, 3, "-237.5"],
    [237.5, 3, "237.5"],
    [0, 3, "0"],
    [-0, 3, "0"],
    [-0.04, 1, "0"], // rounds to zero: never "−0"
    [-0.5, 3, `-0.5`],
    [-1234.56, 3, `-1234.6`],
    [-12345678, 3, `-1.23e+7`],
    [1e12, 3, "1.00e+12"],
    [-2.5e-5, 3, `-2.50e-5`],
    [2.5e-5, 3, `2.50e-5`],
    [-Infinity, 3, `-∞`],
    [Infinity, 3, "∞"],
    [NaN, 3, "—"],
  ])("formatValue(%s, %s) = %s", (v, digits, want) => {
    expect(formatValue(v, digits)).toBe(want);
  });

  it("writes the ASCII minus a copied value parses with, never U+2212", () => {
    for (const v of [-1, -0.25, -1e9, -3e-9]) {
      expect(formatValue(v)).not.toContain(MINUS);
      expect(Number.parseFloat(formatValue(v))).toBeLessThan(0);
    }
  });
});

describe("formatTick (every axis)", () => {
  it.each([
    [-237.5, 2.5, "", `${MINUS}237.5`],
    [-240, 2.5, "", `${MINUS}240.0`],
    [240, 2.5, "", "240.0"],
    [0, 2.5, "", "0.0"],
    [-1.1102230246251565e-16, 0.1, "", "0.0"], // float noise at zero: no "−0.0"
    [-0.25, 0.25, "", `${MINUS}0.25`],
    [-5, 5, "", `${MINUS}5`],
    [-120, 20, " dB", `${MINUS}120 dB`],
    [-73.5673, 0.0001, "°", `${MINUS}73.5673°`],
    [-45000000, 5000000, "", `${MINUS}4.50e+7`],
    [3e-8, 1e-8, "", `3.00e${MINUS}8`],
    [-3e-8, 1e-8, "", `${MINUS}3.00e${MINUS}8`],
    [12, NaN, "", "12"],
    [-12.5, NaN, "", `${MINUS}12.5`],
  ])("formatTick(%s, step %s, %j) = %s", (v, step, suffix, want) => {
    expect(formatTick(v, step, suffix)).toBe(want);
  });

  it("writes the decimals a step needs", () => {
    expect([5, 2.5, 0.25, 0.1, 1e-4, 0.05].map(stepDecimals)).toEqual([0, 1, 2, 1, 4, 2]);
  });

  it("labels uPlot's splits of an FFT's dB axis with their signs", () => {
    expect(tickLabels([-240, -237.5, -235, -232.5], 2.5)).toEqual([`${MINUS}240.0`, `${MINUS}237.5`, `${MINUS}235.0`, `${MINUS}232.5`]);
    expect(tickLabels([-20, 0, 20])).toEqual([`${MINUS}20`, "0", "20"]);
  });
});

describe("axisWidth (the y axis fits its labels)", () => {
  it("leaves room for the widest label, its minus included, the tick and the gap", () => {
    const labels = tickLabels([-240, -237.5, -235], 2.5);
    const need = Math.max(...labels.map(measure)) + 10 + 5;
    const w = axisWidth(labels, measure, { tick: 10, gap: 5 });
    expect(w).toBeGreaterThanOrEqual(need);
    // The FFT's old fixed 44 px axis was too narrow for these labels at 12 px: the sign fell off.
    expect(44).toBeLessThan(need);
  });

  it("grows with an axis title", () => {
    expect(axisWidth(["1"], measure, { title: 18 })).toBe(axisWidth(["1"], measure) + 18);
  });
});

describe("placeLabels", () => {
  it("drops a label that runs into a reserved box, another label or the edge", () => {
    const labels = [
      { x: 10, y: 90, w: 30, h: 10 },
      { x: 35, y: 90, w: 30, h: 10 }, // overlaps the first
      { x: 80, y: 90, w: 30, h: 10 },
      { x: 150, y: 90, w: 30, h: 10 }, // into the reserved box
      { x: 195, y: 90, w: 30, h: 10 }, // off the right edge
    ];
    expect(placeLabels(labels, [{ x: 140, y: 85, w: 40, h: 15 }], { x: 0, y: 0, w: 200, h: 100 })).toEqual([0, 2]);
  });
});
