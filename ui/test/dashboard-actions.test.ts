// What an action button on the dashboard says: its payload as a person reads it, and what a
// click does for each timer mode – in both languages, with no internal names.
import { describe, expect, it } from "vitest";
import { actionHint, payloadText } from "../src/dashboard/actions";
import { strings } from "../src/dashboard/strings";

describe("an action button's payload", () => {
  it.each([
    [{ payload: "READ", hex: false, lineEnding: "lf" as const }, "“READ␊”"],
    [{ payload: "W\r", hex: false, lineEnding: "none" as const }, "“W␍”"],
    [{ payload: "go", hex: false, lineEnding: "crLf" as const }, "“go␍␊”"],
    [{ payload: " AA 55 01 ", hex: true, lineEnding: "lf" as const }, "AA 55 01"],
  ])("%j reads %s", (a, shown) => {
    expect(payloadText(a)).toBe(shown);
  });
});

describe("what a click does", () => {
  it.each([
    [{ timerMs: null }, "dash.action.once", {}],
    [{ timerMs: 50 }, "dash.action.whileConnected", { ms: "50" }],
    [{ timerMs: 50, timer: "whileConnected" as const }, "dash.action.whileConnected", { ms: "50" }],
    [{ timerMs: 20, timer: "startOnClick" as const }, "dash.action.startOnClick", { ms: "20" }],
    [{ timerMs: 20, timer: "toggleOnClick" as const }, "dash.action.toggleOnClick", { ms: "20" }],
    [{ timerMs: 20, timer: "repeat" as const, repeatCount: 4 }, "dash.action.repeat", { ms: "20", count: "4" }],
    [{ timerMs: 20, timer: "repeat" as const }, "dash.action.repeat", { ms: "20", count: "3" }],
  ])("%j says %s", (a, key, values) => {
    const [k, v] = actionHint(a, "“R”");
    expect(k).toBe(key);
    expect(v).toEqual({ payload: "“R”", ...values });
  });

  it("every hint fills each of its values in English and 简体中文", () => {
    for (const key of ["dash.action.once", "dash.action.whileConnected", "dash.action.startOnClick", "dash.action.toggleOnClick", "dash.action.repeat"] as const) {
      for (const table of [strings.en, strings.zh]) {
        const text = table[key];
        expect(text, key).toContain("{payload}");
        if (key !== "dash.action.once") expect(text, key).toContain("{ms}");
        expect(text, key).not.toMatch(/project\.action|timerMs|toggleOnClick|repeatCount/);
      }
    }
  });
});
