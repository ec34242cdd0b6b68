// The display rate is `refreshHz` end to end; a rate saved under its earlier name
// (`displayRateHz`) is read, not lost, and the next save writes the new name only.
import { afterEach, describe, expect, it, vi } from "vitest";
import { DEFAULTS, fromSaved } from "../src/lib/settings.svelte";

describe("saved settings", () => {
  it("read the display rate saved under its earlier name", () => {
    const s = fromSaved({ theme: "dark", language: "en", displayRateHz: 30, points: 500, timeRangeS: 5 });
    expect(s).toEqual({ theme: "dark", language: "en", refreshHz: 30, points: 500, timeRangeS: 5 });
    expect(s).not.toHaveProperty("displayRateHz");
  });
  it("prefer the new name when both were saved", () => {
    expect(fromSaved({ displayRateHz: 30, refreshHz: 120 }).refreshHz).toBe(120);
  });
  it("clamp a migrated rate like any other", () => {
    expect(fromSaved({ displayRateHz: 10_000 }).refreshHz).toBe(240);
    expect(fromSaved({ displayRateHz: "fast" }).refreshHz).toBe(DEFAULTS.refreshHz);
  });
  it("fall back to the defaults for nothing or garbage", () => {
    expect(fromSaved({})).toEqual(DEFAULTS);
    expect(fromSaved(null)).toEqual(DEFAULTS);
    expect(fromSaved([1, 2])).toEqual(DEFAULTS);
  });
});

describe("a person's saved display rate across the rename", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.resetModules();
  });

  it("is loaded from the storage and saved back under refreshHz", async () => {
    const store = new Map<string, string>([
      ["sextant.settings", JSON.stringify({ theme: "light", language: "zh", displayRateHz: 24, points: 2000, timeRangeS: 30 })],
    ]);
    vi.stubGlobal("localStorage", {
      getItem: (k: string) => store.get(k) ?? null,
      setItem: (k: string, v: string) => void store.set(k, v),
    });
    vi.resetModules();
    const { settings, saveSettings } = await import("../src/lib/settings.svelte");
    expect(settings.refreshHz).toBe(24);
    expect(settings.language).toBe("zh");
    saveSettings();
    const saved = JSON.parse(store.get("sextant.settings")!);
    expect(saved).toEqual({ theme: "light", language: "zh", refreshHz: 24, points: 2000, timeRangeS: 30 });
  });
});
