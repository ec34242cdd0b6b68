// What a person reads when a command fails says what failed in words, never the command's
// internal name or its machine error code.
import { describe, expect, it } from "vitest";
import { dictionaries, failKeyOf, failed, type Key } from "../src/lib/i18n/index.svelte";

describe("failure messages", () => {
  const cases: [string, Key][] = [
    ["project.save", "fail.project.save"],
    ["project.group.add", "fail.project"],
    ["sessions.startRecording", "fail.sessions"],
    ["sessions.setDatabase", "fail.sessions.setDatabase"],
    ["io.connect", "fail.io"],
    ["somethingNew.x", "fail.generic"],
  ];
  for (const [command, key] of cases) {
    it(`${command} → ${key}`, () => {
      expect(failKeyOf(command)).toBe(key);
      expect(dictionaries.zh[key]).toBeTruthy();
      const text = failed(command, "disk full");
      expect(text).toBe(`${dictionaries.en[key]}: disk full`);
      expect(text).not.toContain(command);
    });
  }
});
