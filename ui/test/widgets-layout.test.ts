// Widget layout and labelling defects a new user found: FFT axes without units, angular rates
// drawn as angles, a gauge's "0" under its arc, the map's last x label in its scale bar.
import { describe, expect, it } from "vitest";
import { FftPlan, fftUnits, peakBin } from "../src/widgets/math/fft";
import { MINUS, dialLayout, GAUGE, METER } from "../src/widgets/math/scale";
import { niceCeil, rateFraction, rateFullScale, rateScaleLabels, rateText, rateUnit, isRate } from "../src/widgets/math/gyro";
import { fitProjection, mapLayout, scaleBar } from "../src/widgets/math/gps";
import { intersects, type Box } from "../src/widgets/math/ticks";

describe("FFT axis units", () => {
  it("labels x in Hz and y in dB (re 1 of the dataset's unit) when the rate is known", () => {
    expect(fftUnits("", true)).toEqual({ x: "Hz", y: "dB" });
    expect(fftUnits(null, true)).toEqual({ x: "Hz", y: "dB" });
    expect(fftUnits(" V ", true)).toEqual({ x: "Hz", y: "dB re 1 V" });
  });

  it("does not claim Hz when the sample rate is unknown (bins are then cycles per sample)", () => {
    expect(fftUnits("g", false)).toEqual({ x: "f/fs", y: "dB re 1 g" });
  });

  it("is truthful: the plan computes 20·log10 of the amplitude (dB, not linear)", () => {
    const n = 256, rate = 256, plan = new FftPlan(n);
    const a = 0.001; // −60 dB
    plan.run(Float64Array.from({ length: n }, (_, i) => a * Math.sin((2 * Math.PI * 16 * i) / rate)), n, rate);
    const k = peakBin(plan.db, n / 2 + 1);
    expect(plan.freq[k]).toBeCloseTo(16, 9); // Hz at a known rate
    expect(plan.db[k]).toBeCloseTo(-60, 0);
  });
});

describe("gyroscope: rates drawn as rates, angles as an attitude", () => {
  it.each([
    [["°/s", "°/s", "°/s"], true],
    [["deg/s", "", ""], true],
    [["rad/s"], true],
    [["dps", "dps", "dps"], true],
    [["°", "°", "°"], false],
    [["deg", "rad", ""], false],
    [[undefined, null, ""], false],
  ])("units %j hold rates: %s", (units, rates) => {
    expect(isRate(units)).toBe(rates);
  });

  it("reads rates in their own rate unit, else °/s", () => {
    expect(rateUnit(undefined)).toBe("°/s");
    expect(rateUnit("")).toBe("°/s");
    expect(rateUnit("°")).toBe("°/s");
    expect(rateUnit("rad/s")).toBe("rad/s");
  });

  it("shows each rate with its sign and unit", () => {
    expect(rateText(-12.5, "°/s")).toBe("-12.5 °/s");
    expect(rateText(2.5, "°/s")).toBe("+2.5 °/s");
    expect(rateText(0, "°/s")).toBe("0 °/s");
    expect(rateText(NaN, "°/s")).toBe("— °/s");
  });

  it("draws a rate as a bar around zero, clamped at full scale", () => {
    expect(rateFraction(-125, 250)).toBe(-0.5);
    expect(rateFraction(500, 250)).toBe(1);
    expect(rateFraction(NaN, 250)).toBe(0);
    expect(rateScaleLabels(250)).toEqual([`${MINUS}250`, "0", "+250"]);
  });

  it("takes full scale from the datasets' range, else a nice value above the peak", () => {
    expect(rateFullScale([{ min: -250, max: 250 }, {}], 3)).toBe(250);
    expect(rateFullScale([{}, {}], 3)).toBe(10);
    expect(rateFullScale([{}], 37)).toBe(50);
    expect([1, 10, 12, 25, 60, 101].map(niceCeil)).toEqual([1, 10, 20, 50, 100, 200]);
  });
});

/** Whether a point is on a dial's arc stroke (round caps included). */
function onStroke(px: number, py: number, d: { cx: number; cy: number; r: number; lineWidth: number }, arc: { startDeg: number; sweepDeg: number }): boolean {
  const half = d.lineWidth / 2;
  const a0 = (arc.startDeg * Math.PI) / 180, a1 = ((arc.startDeg + arc.sweepDeg) * Math.PI) / 180;
  for (const a of [a0, a1]) if (Math.hypot(px - (d.cx + Math.cos(a) * d.r), py - (d.cy + Math.sin(a) * d.r)) <= half) return true;
  let ang = Math.atan2(py - d.cy, px - d.cx);
  while (ang < a0) ang += 2 * Math.PI;
  return ang <= a1 && Math.abs(Math.hypot(px - d.cx, py - d.cy) - d.r) <= half;
}

/** Whether a label (centred at x, y) has a pixel on the stroke. */
function labelHitsArc(x: number, y: number, w: number, hPx: number, d: Parameters<typeof onStroke>[2], arc: Parameters<typeof onStroke>[3]): boolean {
  for (let px = x - w / 2; px <= x + w / 2; px += 0.5) for (let py = y - hPx / 2; py <= y + hPx / 2; py += 0.5) if (onStroke(px, py, d, arc)) return true;
  return false;
}

describe("dial labels clear of the arc", () => {
  const sizes = [[120, 120], [200, 160], [260, 260], [400, 300], [600, 500], [180, 320]] as const;

  it("the checker sees the old placement: the gauge's 0 under a big arc", () => {
    // Before: 14 px under the end of the arc, whatever its stroke width (r·0.12).
    const w = 600, h = 500, r = Math.min(w, h) / 2 - 12, cx = w / 2, cy = h / 2 + 6;
    const a0 = (GAUGE.startDeg * Math.PI) / 180;
    const old = { cx, cy, r, lineWidth: Math.max(4, r * 0.12) };
    expect(labelHitsArc(cx + Math.cos(a0) * r, cy + Math.sin(a0) * r + 14, 8, 10, old, GAUGE)).toBe(true);
  });

  for (const kind of ["gauge", "meter"] as const) {
    it.each(sizes)(`${kind} %i×%i: min and max labels off the arc and inside the canvas`, (w, h) => {
      const arc = kind === "meter" ? METER : GAUGE;
      for (const labelW of [8, 30]) {
        const d = dialLayout(w, h, kind, 10, labelW);
        for (const l of [d.min, d.max]) {
          expect(labelHitsArc(l.x, l.y, labelW, 10, d, arc), `${kind} ${w}×${h} label at ${l.x},${l.y}`).toBe(false);
          expect(l.y + 5).toBeLessThanOrEqual(h);
          expect(l.x - labelW / 2).toBeGreaterThanOrEqual(0);
          expect(l.x + labelW / 2).toBeLessThanOrEqual(w);
        }
        // The arc itself stays in the canvas.
        expect(d.cy - d.r - d.lineWidth / 2).toBeGreaterThanOrEqual(0);
      }
    });
  }
});

describe("map labels and scale bar", () => {
  const measure = (s: string, px: number) => s.length * px * 0.6;
  const track = (lat0: number, lon0: number, dLat: number, dLon: number) => ({
    lats: Float64Array.from({ length: 20 }, (_, i) => lat0 + (i / 19) * dLat),
    lons: Float64Array.from({ length: 20 }, (_, i) => lon0 + (i / 19) * dLon),
  });

  it("the checker sees the old placement: the last x label ran into the scale bar", () => {
    // Before: longitude labels at h − 30, the bar's label at h − 22 (10 px) on the right.
    const w = 400, h = 300;
    const { lats, lons } = track(45.5, -73.57, 0.01, 0.02);
    const proj = fitProjection(lats, lons, 20, w, h, 24)!;
    const bar = scaleBar(proj.mpp, Math.min(120, w / 3));
    const lw = measure(bar.label, 10);
    const barLabel: Box = { x: w - 10 - bar.px / 2 - lw / 2, y: h - 22 - 6, w: lw, h: 12 };
    const lay = mapLayout(proj, w, h, measure);
    const old = lay.lonLines.map((x, i) => ({ x: x + 2, y: h - 30 - 5.5, w: measure(`-73.${i}000°`, 9), h: 11 }));
    expect(old.some((b) => intersects(b, barLabel))).toBe(true);
  });

  const cases = [
    [400, 300, 45.5, -73.57, 0.01, 0.02],
    [300, 200, -33.9, 151.2, -0.05, 0.08],
    [640, 360, 0.5, -0.5, 0.2, 1.5],
    [220, 180, 51.5, -0.12, 0.001, 0.004],
    [800, 240, -45, 170, 2, 8],
  ] as const;

  it.each(cases)("%i×%i around %f,%f: no label in the scale bar, the readout, another label or off the map", (w, h, lat0, lon0, dLat, dLon) => {
    const { lats, lons } = track(lat0, lon0, dLat, dLon);
    const proj = fitProjection(lats, lons, 20, w, h, 24)!;
    const info: Box = { x: 0, y: 0, w: 180, h: 20 };
    const lay = mapLayout(proj, w, h, measure, [info]);
    const bar = lay.bar;
    const barBox: Box = { x: Math.min(bar.x0, bar.label.box.x), y: bar.y - 16, w: Math.max(bar.x1, bar.label.box.x + bar.label.box.w) - Math.min(bar.x0, bar.label.box.x), h: 18 };
    const labels = [...lay.lat, ...lay.lon];
    expect(lay.lon.length + lay.lat.length).toBeGreaterThan(0);
    for (const l of labels) {
      expect(intersects(l.box, barBox), `${l.text} in the scale bar`).toBe(false);
      expect(intersects(l.box, info), `${l.text} under the readout`).toBe(false);
      expect(l.box.x).toBeGreaterThanOrEqual(0);
      expect(l.box.x + l.box.w).toBeLessThanOrEqual(w);
      expect(l.box.y + l.box.h).toBeLessThanOrEqual(h);
      for (const o of labels) if (o !== l) expect(intersects(l.box, o.box), `${l.text} over ${o.text}`).toBe(false);
    }
    // Negative coordinates keep their sign.
    if (lon0 < 0) for (const l of lay.lon) if (l.text.startsWith(MINUS)) expect(l.text).toMatch(new RegExp(`^${MINUS}\\d`));
  });
});
