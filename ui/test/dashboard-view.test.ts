import { describe, expect, it } from "vitest";
import { settingsForView } from "../src/dashboard/view";
import { DEFAULTS } from "../src/lib/settings.svelte";

describe("following the backend's view", () => {
  it("takes the changed fields only", () => {
    expect(settingsForView(DEFAULTS, { timeRangeS: 30, points: DEFAULTS.points, refreshHz: 60 })).toEqual({ timeRangeS: 30 });
  });
  it("an unchanged view changes nothing (no echo loop with the toolbar)", () => {
    expect(settingsForView(DEFAULTS, { timeRangeS: DEFAULTS.timeRangeS, points: DEFAULTS.points, refreshHz: DEFAULTS.refreshHz })).toBeNull();
  });
  it("clamps what the display cannot request and ignores garbage", () => {
    expect(settingsForView(DEFAULTS, { points: 1_000_000, refreshHz: 0, timeRangeS: Number.NaN })).toEqual({ points: 100000, refreshHz: 1 });
    expect(settingsForView(DEFAULTS, { timeRangeS: -5 } as any)).toBeNull();
  });
});
