// The tile menu's pure part (dashboard/tile/settings.ts): which settings each kind of tile
// offers, and how what a person typed becomes the `changes` of a project.dataset.update –
// refused (nothing sent) when it is not a valid range or number.
import { describe, expect, it } from "vitest";
import { FFT_WINDOWS, buildChanges, buildUpdates, draftOf, menuFor, parseNumber, type Draft, type Field } from "../src/dashboard/tile/settings";
import type { Dataset } from "../src/lib/model";
import { strings } from "../src/dashboard/strings";

const ds = (over: Partial<Dataset> = {}): Dataset => ({ id: "ds-1", title: "Speed", units: "m/s", min: null, max: null, fftSamples: 1024, ...over });
const draft = (d: Dataset, over: Partial<Draft> = {}): Draft => ({ ...draftOf(d), ...over });

describe("what a tile offers", () => {
  const cases: [string, Parameters<typeof menuFor>[0], Field[][] | null, boolean | null][] = [
    ["time plot: range, units and the scope's settings", { kind: "plot", datasetRef: ds() }, [["range", "units", "join", "log", "peaks", "trigger"]], true],
    ["sample plot: no trigger (it has no time)", { kind: "plot", datasetRef: ds({ xAxis: { mode: "samples" } }) }, [["range", "units", "join", "log", "peaks"]], true],
    ["XY plot (against another dataset)", { kind: "plot", datasetRef: ds({ xAxis: { mode: "dataset", id: "ds-2" } }) }, [["units"]], true],
    ["multi-plot: each dataset's units", { kind: "multiplot", groupRef: { id: "g", title: "G", datasets: [ds(), ds({ id: "ds-2" })] } }, [["units", "join"], ["units", "join"]], true],
    ["FFT: units and its window", { kind: "fft", datasetRef: ds() }, [["units", "window"]], false],
    ["gauge", { kind: "gauge", datasetRef: ds() }, [["range", "units"]], false],
    ["meter", { kind: "meter", datasetRef: ds() }, [["range", "units"]], false],
    ["bar panel: a section per dataset", { kind: "bar", groupRef: { id: "g", title: "G", datasets: [ds(), ds({ id: "ds-2" })] } }, [["range", "units"], ["range", "units"]], false],
    ["data grid: nothing", { kind: "datagrid", groupRef: { id: "g", title: "G", datasets: [ds()] } }, null, null],
    ["terminal: nothing", { kind: "terminal", groupRef: { id: "g", title: "G", datasets: [] } }, null, null],
    ["a plot with no datasets: nothing", { kind: "multiplot", groupRef: { id: "g", title: "G", datasets: [] } }, null, null],
  ];
  it.each(cases)("%s", (_name, tile, fields, points) => {
    const m = menuFor(tile);
    if (fields === null) return expect(m).toBeNull();
    expect(m!.sections.map((s) => s.fields)).toEqual(fields);
    expect(m!.followsPoints).toBe(points);
  });
  it("a plot's automatic range fits the data; a gauge's is its default scale", () => {
    expect(menuFor({ kind: "plot", datasetRef: ds() })!.auto).toBe("fit");
    expect(menuFor({ kind: "gauge", datasetRef: ds() })!.auto).toBe("default");
  });
});

describe("the draft of a dataset", () => {
  it("reads a range as fixed when a bound is set, automatic when neither is", () => {
    expect(draftOf(ds())).toMatchObject({ fixed: false, min: "", max: "" });
    expect(draftOf(ds({ min: -1.5, max: 3 }))).toMatchObject({ fixed: true, min: "-1.5", max: "3" });
    expect(draftOf(ds({ min: 10 }))).toMatchObject({ fixed: true, min: "10", max: "" });
  });
});

describe("numbers as typed", () => {
  it.each([
    ["0", 0], [" -2.5 ", -2.5], ["+3", 3], ["1e3", 1000], [".5", 0.5], ["7.", 7],
    ["", undefined], ["abc", undefined], ["1,5", undefined], ["Infinity", undefined], ["NaN", undefined], ["0x10", undefined], ["1e999", undefined], ["- 1", undefined],
  ])("%j → %s", (text, n) => expect(parseNumber(text)).toBe(n));
});

describe("building the changes", () => {
  const range: Field[] = ["range", "units"];
  type Row = [string, Dataset, Field[], Partial<Draft>, Record<string, unknown> | Record<string, string>, boolean];
  const rows: Row[] = [
    ["a fixed range sets min and max", ds(), range, { fixed: true, min: "0", max: "100" }, { min: 0, max: 100 }, true],
    ["automatic clears both bounds", ds({ min: 0, max: 5 }), range, { fixed: false }, { min: null, max: null }, true],
    ["automatic clears a lone bound", ds({ min: 2 }), range, { fixed: false }, { min: null }, true],
    ["automatic when already automatic changes nothing", ds(), range, { fixed: false }, {}, true],
    ["only the bound that changed is sent", ds({ min: 0, max: 5 }), range, { fixed: true, min: "0", max: "8" }, { max: 8 }, true],
    ["min equal to max is refused", ds(), range, { fixed: true, min: "5", max: "5" }, { max: "tile.err.order" }, false],
    ["min above max is refused", ds(), range, { fixed: true, min: "10", max: "-1" }, { max: "tile.err.order" }, false],
    ["a word is not a number", ds(), range, { fixed: true, min: "low", max: "10" }, { min: "tile.err.number" }, false],
    ["an empty bound of a fixed range is asked for", ds(), range, { fixed: true, min: "", max: "x" }, { min: "tile.err.required", max: "tile.err.number" }, false],
    ["units are trimmed", ds({ units: "" }), range, { units: "  °C \t" }, { units: "°C" }, true],
    ["units unchanged after trimming are not sent", ds(), range, { units: " m/s " }, {}, true],
    ["units can be cleared", ds(), range, { units: "   " }, { units: "" }, true],
    ["a range the tile does not offer is ignored", ds(), ["units"], { fixed: true, min: "9", max: "1" }, {}, true],
    ["an FFT window from the list", ds(), ["window"], { window: "4096" }, { fftSamples: 4096 }, true],
    ["an FFT window not on the list is refused", ds(), ["window"], { window: "1000" }, { window: "tile.err.window" }, false],
    ["the dataset's own unusual window is kept as it is", ds({ fftSamples: 100 }), ["window"], { window: "100" }, {}, true],
    ["steps instead of lines", ds(), ["join"], { interpolation: "step" }, { interpolation: "step" }, true],
    ["lines again are sent, dots kept are not", ds({ interpolation: "none" }), ["join"], { interpolation: "none" }, {}, true],
    ["a log axis and a peak hold", ds(), ["log", "peaks"], { log: true, peakHold: true }, { log: true, peakHold: true }, true],
    ["a trigger, whole", ds(), ["trigger"], { trigger: "single", edge: "falling", level: "-1.5", pre: "25" }, { trigger: { dataset: null, edge: "falling", level: -1.5, preTrigger: 0.25, mode: "single" } }, true],
    ["a trigger keeps the dataset it watches", ds({ trigger: { dataset: "ds-9", level: 1, edge: "rising", preTrigger: 0.5, mode: "auto" } }), ["trigger"], { trigger: "normal", level: "2" }, { trigger: { dataset: "ds-9", edge: "rising", level: 2, preTrigger: 0.5, mode: "normal" } }, true],
    ["an unchanged trigger is not sent", ds({ trigger: { level: 1, mode: "auto", preTrigger: 0.5, edge: "rising" } }), ["trigger"], {}, {}, true],
    ["off removes the trigger", ds({ trigger: { level: 1, mode: "auto", preTrigger: 0.5, edge: "rising" } }), ["trigger"], { trigger: "off" }, { trigger: null }, true],
    ["a trigger needs a level and a share from 0 to 100", ds(), ["trigger"], { trigger: "auto", level: "", pre: "150" }, { level: "tile.err.required", pre: "tile.err.percent" }, false],
    ["settings the tile does not offer are ignored", ds(), ["units"], { log: true, trigger: "auto", level: "x" }, {}, true],
  ];
  it.each(rows)("%s", (_name, d, fields, over, expected, ok) => {
    const r = buildChanges(d, fields, draft(d, over));
    expect(r.ok).toBe(ok);
    if (r.ok) expect(r.changes).toEqual(expected);
    else expect(r.errors).toEqual(expected);
  });
  it("every error is a dashboard string in both languages", () => {
    for (const k of ["tile.err.order", "tile.err.number", "tile.err.required", "tile.err.window", "tile.err.percent"] as const) {
      expect(strings.en[k]).toBeTruthy();
      expect(strings.zh[k]).toBeTruthy();
    }
  });
  it("the FFT windows are powers of two the FFT draws unchanged", () => {
    for (const n of FFT_WINDOWS) expect(Math.log2(n) % 1 === 0 && n >= 8 && n <= 65536).toBe(true);
  });
});

describe("a tile's updates", () => {
  const a = ds({ id: "a", min: 0, max: 10 }), b = ds({ id: "b", title: "Load", units: "kg" });
  const menu = menuFor({ kind: "bar", groupRef: { id: "g", title: "G", datasets: [a, b] } })!;
  it("one update per changed dataset, none for an unchanged one", () => {
    const r = buildUpdates(menu, { a: draft(a, { max: "20" }), b: draftOf(b) });
    expect(r).toEqual({ ok: true, updates: [{ id: "a", changes: { max: 20 } }] });
  });
  it("one refused section sends nothing at all", () => {
    const r = buildUpdates(menu, { a: draft(a, { max: "20" }), b: draft(b, { fixed: true, min: "3", max: "1" }) });
    expect(r).toEqual({ ok: false, errors: { b: { max: "tile.err.order" } } });
  });
});
