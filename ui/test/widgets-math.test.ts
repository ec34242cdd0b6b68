import { describe, expect, it } from "vitest";
import { FftPlan, estimateRate, floorPow2, peakBin } from "../src/widgets/math/fft";
import { GAUGE, METER, cardinal, formatValue, fraction, needleAngle, normalizeHeading, rangeOf } from "../src/widgets/math/scale";
import { AlarmEpisodes, classify, clearMargin } from "../src/widgets/math/alarms";
import { ledOn } from "../src/widgets/math/led";
import { distanceM, fitProjection, gridStep, niceFloor, projectX, projectY, scaleBar, unprojectX, unprojectY } from "../src/widgets/math/gps";
import { horizon, normalizeAttitude } from "../src/widgets/math/attitude";
import { clockText } from "../src/widgets/math/clock";
import { magnitude } from "../src/widgets/math/vector";
import { toCsv } from "../src/widgets/math/csv";
import { Aligner, Counter, legendReading, normalise, padRange, stickyRange, windowPoints, yRange } from "../src/widgets/plotdata";
import { NARROW_AFTER, stickyWidth } from "../src/widgets/axes";

const DEG = Math.PI / 180;

describe("FFT", () => {
  const n = 256, rate = 256;
  const sine = (f: number, a: number, count = n, offset = 0) =>
    Float64Array.from({ length: count }, (_, i) => offset + a * Math.sin((2 * Math.PI * f * i) / rate));

  it("finds a sine's bin and amplitude (in dB) with the window corrected", () => {
    const plan = new FftPlan(n);
    const bins = plan.run(sine(32, 2), n, rate);
    expect(bins).toBe(n / 2 + 1);
    const k = peakBin(plan.db, bins);
    expect(k).toBe(32);
    expect(plan.freq[k]).toBeCloseTo(32, 9);
    expect(plan.db[k]).toBeCloseTo(20 * Math.log10(2), 1);
  });

  it("removes the mean so DC does not hide the signal", () => {
    const plan = new FftPlan(n);
    plan.run(sine(10, 1, n, 1000), n, rate);
    expect(peakBin(plan.db, n / 2 + 1, 0)).toBe(10);
  });

  it("uses the newest samples, zero-pads short input and survives NaN", () => {
    const plan = new FftPlan(n);
    const long = new Float64Array(3 * n);
    long.set(sine(50, 1), 2 * n); // only the newest n hold the 50 Hz tone
    plan.run(long, long.length, rate);
    expect(peakBin(plan.db, n / 2 + 1)).toBe(50);
    const short = sine(20, 1, 100);
    short[5] = NaN;
    plan.run(short, short.length, rate);
    expect(Array.from(plan.db).every(Number.isFinite)).toBe(true);
    expect(Math.abs(peakBin(plan.db, n / 2 + 1) - 20)).toBeLessThanOrEqual(1);
  });

  it("refuses non power-of-two sizes; helpers", () => {
    expect(() => new FftPlan(100)).toThrow(RangeError);
    expect(floorPow2(1000)).toBe(512);
    expect(floorPow2(0)).toBe(0);
    expect(estimateRate([0, 0.01, 0.02, 0.03], 4)).toBeCloseTo(100);
    expect(Number.isNaN(estimateRate([1, 1], 2))).toBe(true);
    expect(Number.isNaN(estimateRate([1], 1))).toBe(true);
  });

  it("an empty input gives a flat floor, not NaN", () => {
    const plan = new FftPlan(16);
    plan.run([], 0, NaN);
    expect(Array.from(plan.db).every((v) => v === -240)).toBe(true);
  });
});

describe("gauge and meter scales", () => {
  it("maps and clamps values to a fraction", () => {
    expect(fraction(5, 0, 10)).toBe(0.5);
    expect(fraction(-3, 0, 10)).toBe(0);
    expect(fraction(1e300, 0, 10)).toBe(1);
    expect(fraction(Infinity, 0, 10)).toBeNaN();
    expect(fraction(NaN, 0, 10)).toBeNaN();
    expect(fraction(5, 3, 3)).toBeNaN();
  });

  it("supports reversed ranges (min > max)", () => {
    expect(fraction(10, 10, 0)).toBe(0);
    expect(fraction(2.5, 10, 0)).toBe(0.75);
    expect(fraction(20, 10, 0)).toBe(0);
    expect(fraction(-5, 10, 0)).toBe(1);
  });

  it("gives needle angles over the arc, clamped at the ends", () => {
    expect(needleAngle(0, 0, 100, GAUGE)).toBeCloseTo(135 * DEG);
    expect(needleAngle(100, 0, 100, GAUGE)).toBeCloseTo(405 * DEG);
    expect(needleAngle(50, 0, 100, GAUGE)).toBeCloseTo(270 * DEG); // straight up
    expect(needleAngle(500, 0, 100, METER)).toBeCloseTo(360 * DEG);
    expect(needleAngle(-500, 0, 100, METER)).toBeCloseTo(180 * DEG);
    expect(needleAngle(NaN, 0, 100, METER)).toBeNaN();
  });

  it("picks a usable range", () => {
    expect(rangeOf(null, null)).toEqual([0, 100]);
    expect(rangeOf(3, 4.2)).toEqual([3, 4.2]);
    expect(rangeOf(5, 5)).toEqual([0, 100]);
    expect(rangeOf(10, 0)).toEqual([10, 0]);
  });

  it("formats values without throwing on anything", () => {
    expect(formatValue(NaN)).toBe("—");
    expect(formatValue(Infinity)).toBe("∞");
    expect(formatValue(1.5)).toBe("1.5");
    expect(formatValue(2)).toBe("2");
    expect(formatValue(1e12)).toBe("1.00e+12");
    expect(formatValue(0)).toBe("0");
  });
});

describe("compass", () => {
  it("normalises headings into [0, 360)", () => {
    expect(normalizeHeading(370)).toBe(10);
    expect(normalizeHeading(-90)).toBe(270);
    expect(normalizeHeading(360)).toBe(0);
    expect(Object.is(normalizeHeading(-0), 0)).toBe(true);
    expect(normalizeHeading(-720)).toBe(0);
    expect(normalizeHeading(NaN)).toBeNaN();
    expect(normalizeHeading(-1e-15)).toBeLessThan(360);
  });

  it("names the nearest compass point", () => {
    expect(cardinal(0)).toBe("N");
    expect(cardinal(350)).toBe("N");
    expect(cardinal(44)).toBe("NE");
    expect(cardinal(-90)).toBe("W");
    expect(cardinal(181)).toBe("S");
    expect(cardinal(NaN)).toBeNull();
  });
});

describe("alarm bands", () => {
  const bands = [
    { min: 27, max: 50, severity: "warning", label: "Warm" },
    { min: 45, max: 60, severity: "critical", label: "Hot" },
    { min: -10, max: 0, severity: "info", label: "Cold" },
  ];
  it("classifies by the most severe containing band, bounds inclusive", () => {
    expect(classify(20, bands).level).toBe("normal");
    expect(classify(27, bands).level).toBe("warn");
    expect(classify(47, bands)).toMatchObject({ level: "alarm", band: { label: "Hot" } });
    expect(classify(60, bands).level).toBe("alarm");
    expect(classify(-5, bands)).toMatchObject({ level: "normal", band: { label: "Cold" } });
    expect(classify(NaN, bands).level).toBe("normal");
    expect(classify(30, null).level).toBe("normal");
    expect(classify(5, [{ min: 10, max: 0, severity: "critical" }]).level).toBe("alarm");
  });

  it("a value oscillating around a threshold notifies once per episode (hysteresis)", () => {
    const ep = new AlarmEpisodes();
    const range = 50; // the dataset's 0…50: the clearing margin is 1
    const warm = [bands[0]];
    let toasts = 0;
    let now = 0;
    // 26.9 / 27.1 every 100 ms for a minute: across the threshold 600 times.
    for (let i = 0; i < 600; i++, now += 100) if (ep.update("t", i % 2 ? 27.1 : 26.9, warm, now, range)) toasts++;
    expect(toasts).toBe(1);
    expect(ep.level("t")).toBe("warn");
    // 26.5 is below the band but within the margin: still the same episode.
    ep.update("t", 26.5, warm, (now += 100), range);
    expect(ep.level("t")).toBe("warn");
    // 25.9 is clear of it.
    ep.update("t", 25.9, warm, (now += 100), range);
    expect(ep.level("t")).toBe("normal");
  });

  it("a cleared alarm raised again within the cooldown does not notify; after it, it does", () => {
    const ep = new AlarmEpisodes(30_000);
    const warm = [bands[0]];
    expect(ep.update("t", 28, warm, 0, 50)).toMatchObject({ level: "warn", band: { label: "Warm" } });
    expect(ep.update("t", 20, warm, 5_000, 50)).toBeNull(); // cleared at 5 s
    expect(ep.update("t", 28, warm, 20_000, 50)).toBeNull(); // 15 s later: same episode
    expect(ep.level("t")).toBe("warn");
    expect(ep.update("t", 20, warm, 21_000, 50)).toBeNull();
    // The cooldown counts from when it was last active (21 s), not from the first toast.
    expect(ep.update("t", 28, warm, 45_000, 50)).toBeNull();
    expect(ep.update("t", 20, warm, 46_000, 50)).toBeNull();
    expect(ep.update("t", 28, warm, 76_001, 50)).toMatchObject({ level: "warn" });
  });

  it("a worse level is a new notification; a better one never is", () => {
    const ep = new AlarmEpisodes();
    expect(ep.update("t", 30, bands, 0, 100)).toMatchObject({ level: "warn" });
    expect(ep.update("t", 47, bands, 100, 100)).toMatchObject({ level: "alarm", band: { label: "Hot" } });
    // Back in the warning band, clear of the critical one by more than 2: warn, no toast.
    expect(ep.update("t", 42, bands, 200, 100)).toBeNull();
    expect(ep.level("t")).toBe("warn");
    // Other datasets are their own episodes.
    expect(ep.update("other", 30, bands, 300, 100)).toMatchObject({ level: "warn" });
  });

  it("no value holds the episode; a band the project dropped holds nothing", () => {
    const ep = new AlarmEpisodes();
    expect(ep.update("t", 28, [bands[0]], 0, 50)).not.toBeNull();
    expect(ep.update("t", NaN, [bands[0]], 100, 50)).toBeNull();
    expect(ep.level("t")).toBe("warn");
    ep.update("t", 26.9, [], 200, 50);
    expect(ep.level("t")).toBe("normal");
  });

  it("the clearing margin: a share of the range, else of the band, else of the edge", () => {
    expect(clearMargin({ min: 27, max: 50, severity: "warning" }, 50)).toBeCloseTo(1);
    expect(clearMargin({ min: 27, max: 50, severity: "warning" }, null)).toBeCloseTo(0.46);
    expect(clearMargin({ min: 100, max: 100, severity: "critical" })).toBeCloseTo(2);
    expect(clearMargin({ min: 0, max: 0, severity: "critical" })).toBe(0);
  });
});

describe("LED", () => {
  it("is on at or above the threshold", () => {
    expect(ledOn(5, 5)).toBe(true);
    expect(ledOn(4.99, 5)).toBe(false);
    expect(ledOn(-1, -2)).toBe(true);
  });
  it("without a threshold is on when non-zero; never on for NaN", () => {
    expect(ledOn(0, null)).toBe(false);
    expect(ledOn(-3, undefined)).toBe(true);
    expect(ledOn(NaN, 0)).toBe(false);
    expect(ledOn(NaN, null)).toBe(false);
  });
});

describe("GPS projection", () => {
  it("fits a track into the box with north up and equal metres per pixel on both axes", () => {
    const lats = [52.5, 52.51], lons = [13.4, 13.42];
    const p = fitProjection(lats, lons, 2, 400, 300, 20)!;
    const x0 = projectX(13.4, p), x1 = projectX(13.42, p);
    const y0 = projectY(52.5, p), y1 = projectY(52.51, p);
    expect(y1).toBeLessThan(y0); // north is up
    for (const v of [x0, x1]) expect(v).toBeGreaterThanOrEqual(19.999);
    for (const v of [x0, x1]) expect(v).toBeLessThanOrEqual(380.001);
    for (const v of [y0, y1]) expect(v).toBeGreaterThanOrEqual(19.999);
    for (const v of [y0, y1]) expect(v).toBeLessThanOrEqual(280.001);
    const dx = distanceM(52.505, 13.4, 52.505, 13.42), dy = distanceM(52.5, 13.41, 52.51, 13.41);
    expect(Math.abs(x1 - x0) * p.mpp).toBeCloseTo(dx, -1);
    expect(Math.abs(y1 - y0) * p.mpp).toBeCloseTo(dy, -1);
    expect(unprojectX(projectX(13.41, p), p)).toBeCloseTo(13.41, 9);
    expect(unprojectY(projectY(52.503, p), p)).toBeCloseTo(52.503, 9);
  });

  it("ignores invalid fixes and returns null with none", () => {
    expect(fitProjection([NaN, 0, 91], [1, 0, 1], 3, 100, 100)).toBeNull();
    const p = fitProjection([NaN, 10], [5, 20], 2, 100, 100)!;
    expect(p.lat0).toBe(10);
    expect(p.lon0).toBe(20);
    expect(p.mpp).toBeGreaterThan(0);
  });

  it("picks 1/2/5 scale bars and grid steps", () => {
    expect(niceFloor(740)).toBe(500);
    expect(niceFloor(0.0031)).toBeCloseTo(0.002);
    expect(scaleBar(10, 120)).toMatchObject({ meters: 1000, px: 100, label: "1 km" });
    expect(scaleBar(0.5, 100)).toMatchObject({ meters: 50, px: 100, label: "50 m" });
    expect(gridStep(0.02, 4)).toBeCloseTo(0.005);
    expect(distanceM(0, 0, 0, 1)).toBeCloseTo(111195, -1);
  });
});

describe("attitude", () => {
  it("level flight puts a horizontal horizon through the centre", () => {
    const h = horizon(0, 0, 100, 100, 2);
    expect(h.x).toBeCloseTo(100);
    expect(h.y).toBeCloseTo(100);
    expect(h.dy).toBeCloseTo(0);
  });
  it("nose up moves the horizon down; right roll tilts it counter-clockwise", () => {
    expect(horizon(10, 0, 100, 100, 2).y).toBeCloseTo(120);
    const h = horizon(0, 30, 100, 100, 2);
    expect(h.angle).toBeCloseTo(-30 * DEG);
    expect(h.dy).toBeLessThan(0);
    // Pitch shifts perpendicular to the rolled horizon.
    const hp = horizon(10, 90, 0, 0, 1);
    expect(hp.x).toBeCloseTo(10);
    expect(hp.y).toBeCloseTo(0);
  });
  it("normalises out-of-range and missing angles", () => {
    expect(normalizeAttitude(120, 190)).toEqual({ pitch: 90, roll: -170 });
    expect(normalizeAttitude(NaN, -180)).toEqual({ pitch: 0, roll: 180 });
    expect(normalizeAttitude(-95, 540)).toEqual({ pitch: -90, roll: 180 });
  });
});

describe("clock, vectors, csv", () => {
  it("reads seconds since midnight and Unix times", () => {
    expect(clockText(3661, 0)).toBe("01:01:01");
    expect(clockText(86400 + 5, 0)).toBe("00:00:05");
    expect(clockText(-1, 0)).toBe("23:59:59");
    expect(clockText(1700000000, 0)).toBe("22:13:20");
    expect(clockText(1700000000000, 0)).toBe("22:13:20");
    expect(clockText(1700000000, -60)).toBe("23:13:20");
    expect(clockText(NaN)).toBe("--:--:--");
  });
  it("magnitude tolerates a missing z", () => {
    expect(magnitude(3, 4, 12)).toBe(13);
    expect(magnitude(3, 4, NaN)).toBe(5);
    expect(magnitude(NaN, 4, 1)).toBeNaN();
  });
  it("CSV quotes headers and blanks non-finite values", () => {
    expect(toCsv(["t", 'a "b", c'], [[1, 2], [NaN, 5]])).toBe('t,"a ""b"", c"\n1,\n2,5\n');
  });
});

describe("plot data", () => {
  it("passes aligned windows through without copying", () => {
    const a = new Aligner();
    const x = Float64Array.of(1, 2, 3), v = Float64Array.of(4, 5, 6);
    expect(a.align(0, x, Float64Array.of(1, 2, 3), v)).toBe(v);
  });
  it("resamples other windows onto x with NaN outside, reusing its buffer", () => {
    const a = new Aligner();
    const x = Float64Array.of(0, 1, 2, 3);
    const out = a.align(0, x, Float64Array.of(1, 3), Float64Array.of(10, 30));
    expect(Array.from(out)).toEqual([NaN, 10, 20, 30]);
    expect(a.align(0, x, Float64Array.of(0, 3), Float64Array.of(0, 3))).toBe(out);
    expect(Array.from(a.align(1, x, undefined, undefined)).every(Number.isNaN)).toBe(true);
  });
  it("finds y ranges over the visible x only, ignoring NaN", () => {
    const x = [0, 1, 2, 3];
    expect(yRange(x, [[NaN, 1, 3, 100]], 0, 2)).toEqual(padRange(1, 3));
    expect(yRange(x, [[NaN, NaN, NaN, NaN]])).toBeNull();
    expect(yRange(x, [x, [5, 6, 7, 8]], -Infinity, Infinity, 1)).toEqual(padRange(5, 8));
    expect(padRange(5, 5)).toEqual([4.5, 5.5]);
    expect(padRange(0, 0)).toEqual([-1, 1]);
  });
  it("counts samples in a reused buffer", () => {
    const c = new Counter();
    expect(Array.from(c.get(3))).toEqual([0, 1, 2]);
    expect(Array.from(c.get(5))).toEqual([0, 1, 2, 3, 4]);
    expect(c.get(0).length).toBe(0);
  });
});

describe("normalised plot view", () => {
  const x = Float64Array.from([0, 1, 2, 3, 4]);
  it("a 405 m altitude and a ±1 signal both span the height", () => {
    const alt = Float64Array.from([405, 405.5, 406, 405.2, 405.8]);
    const sig = Float64Array.from([-1, 0, 1, 0, -1]);
    const a = new Float64Array(5), b = new Float64Array(5);
    normalise(a, x, alt);
    normalise(b, x, sig);
    for (const out of [a, b]) {
      const lo = Math.min(...out), hi = Math.max(...out);
      expect(lo).toBeGreaterThanOrEqual(0);
      expect(hi).toBeLessThanOrEqual(1);
      expect(hi - lo).toBeGreaterThan(0.85); // 5 % headroom either side
    }
    // On one shared axis the signal would be a flat line: 2 of 407.
    const shared = yRange(x, [alt, sig])!;
    expect(2 / (shared[1] - shared[0])).toBeLessThan(0.01);
  });

  it("scales over the visible window only; flat is mid-height; NaN stays a gap", () => {
    const v = Float64Array.from([1000, 1, 2, NaN, 3]);
    const out = new Float64Array(5);
    expect(normalise(out, x, v, 1, 4)).toEqual(padRange(1, 3));
    expect(out[1]).toBeCloseTo(0.05 / 1.1, 5);
    expect(out[4]).toBeCloseTo(1.05 / 1.1, 5);
    expect(Number.isNaN(out[3])).toBe(true);
    const flat = new Float64Array(5);
    normalise(flat, x, Float64Array.from([7, 7, 7, 7, 7]));
    expect([...flat].every((y) => Math.abs(y - 0.5) < 1e-9)).toBe(true);
    expect(normalise(flat, x, Float64Array.from([NaN, NaN, NaN, NaN, NaN]))).toBeNull();
    expect([...flat].every(Number.isNaN)).toBe(true);
  });
});

describe("legend reading", () => {
  it("off the plot: the series' latest value, even where the drawn window has none", () => {
    // A decimated series resampled onto another's times ends before the last one.
    const aligned = Float64Array.from([1, 2, NaN]);
    expect(legendReading(false, aligned, 2, 2.5)).toBe(2.5);
    expect(legendReading(false, undefined, null, 7)).toBe(7);
  });
  it("under the cursor: the value at the cursor's sample", () => {
    const raw = Float64Array.from([1, 2, 3]);
    expect(legendReading(true, raw, 1, 9)).toBe(2);
    expect(legendReading(true, raw, null, 9)).toBeNaN();
    expect(legendReading(true, raw, 5, 9)).toBeNaN();
  });
});

describe("a plot's steadiness under live data", () => {
  it("keeps the autoscaled range while the data fills it, and follows when it does not", () => {
    expect(stickyRange(null, [0, 10])).toEqual([0, 10]);
    expect(stickyRange([0, 10], null)).toEqual([0, 10]);
    // Noise moving the extremes inside the range: kept.
    expect(stickyRange([0, 10], [0.5, 9.7])).toEqual([0, 10]);
    // Out of it at either end: the data's own range.
    expect(stickyRange([0, 10], [0.5, 10.2])).toEqual([0.5, 10.2]);
    expect(stickyRange([0, 10], [-1, 9])).toEqual([-1, 9]);
    // Shrunk to under half of it: re-fitted, so a small signal is not a flat line.
    expect(stickyRange([0, 10], [4, 8])).toEqual([4, 8]);
    expect(stickyRange([0, 10], [4, 9.5])).toEqual([0, 10]);
  });

  it("widens the y axis at once and narrows it only after a second of narrower labels", () => {
    const mem: { _narrower?: number } = {};
    expect(stickyWidth(undefined, 40, mem)).toBe(40);
    expect(stickyWidth(40, 52, mem)).toBe(52);
    let w = 52;
    for (let i = 1; i < NARROW_AFTER; i++) w = stickyWidth(w, 40, mem);
    expect(w).toBe(52);
    // A wider frame in between starts the count again.
    expect(stickyWidth(w, 52, mem)).toBe(52);
    for (let i = 1; i < NARROW_AFTER; i++) w = stickyWidth(w, 40, mem);
    expect(w).toBe(52);
    expect(stickyWidth(w, 40, mem)).toBe(40);
  });

  it("asks for two points per pixel, in steps, whatever the points setting", () => {
    expect(windowPoints(400)).toBe(1024);
    expect(windowPoints(384)).toBe(768);
    expect(windowPoints(385)).toBe(1024);
    expect(windowPoints(1920)).toBe(3840);
    expect(windowPoints(0)).toBe(1024);
    expect(windowPoints(NaN)).toBe(1024);
    for (const px of [1, 37, 333, 1000, 2561]) {
      const n = windowPoints(px);
      expect(n).toBeGreaterThanOrEqual(2 * px);
      expect(n - 2 * px).toBeLessThan(256);
    }
  });
});
