// A failed write (recording, export, save) in the person's words: each kind the backend
// classifies reads as a sentence in English and 简体中文, never as the kind's code.
import { afterEach, describe, expect, it } from "vitest";
import { settings } from "../src/lib/settings.svelte";
import { writeProblemText, type WriteProblem } from "../src/lib/writeProblem";

const cases: { problem: WriteProblem; en: RegExp; zh: RegExp }[] = [
  { problem: { kind: "diskFull", detail: "No space left on device (os error 28)" }, en: /^the disk is full/, zh: /^磁盘已满/ },
  { problem: { kind: "denied", detail: "Permission denied (os error 13)" }, en: /does not allow writing/, zh: /不允许写入/ },
  { problem: { kind: "other", detail: "Input/output error (os error 5)" }, en: /^Input\/output error/, zh: /^Input\/output error/ },
];

describe("write problems", () => {
  afterEach(() => {
    settings.language = "en";
  });
  for (const c of cases) {
    it(`words ${c.problem.kind} in both languages`, () => {
      settings.language = "en";
      const en = writeProblemText(c.problem);
      settings.language = "zh";
      const zh = writeProblemText(c.problem);
      expect(en).toMatch(c.en);
      expect(zh).toMatch(c.zh);
      for (const text of [en, zh]) {
        expect(text).not.toMatch(/diskFull|denied\b|kind|\{/);
        // A classified kind is worded, not the system's text with its error number.
        if (c.problem.kind !== "other") expect(text).not.toMatch(/os error/);
      }
    });
  }
});
