import { describe, expect, it } from "vitest";
import schema from "../src/lib/wire/schema.json";
import { MECHANISMS, MECHANISM_KEYS, mechanismsOf } from "../src/chat/mechanisms";
import { settingsRequest } from "../src/chat/protocol";
import { dictionaries } from "../src/lib/i18n/index.svelte";

/** The mechanisms Rust has, read from the schema it generated (not from the TS types). */
const fromRust = Object.keys((schema as any).definitions.Mechanisms.properties);

describe("the assistant's mechanisms in the panel", () => {
  it("every mechanism of the Rust settings has a toggle, and no other", () => {
    expect([...MECHANISM_KEYS].sort()).toEqual([...fromRust].sort());
    expect(MECHANISM_KEYS).toContain("archiveTools");
    const ids = MECHANISM_KEYS.map((k) => MECHANISMS[k].id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("every toggle says what it does, in English and 简体中文", () => {
    for (const k of MECHANISM_KEYS) {
      for (const strings of [dictionaries.en, dictionaries.zh] as Record<string, string>[]) {
        expect(strings[`chat.settings.${k}`], k).toBeTruthy();
        expect(strings[`chat.settings.${k}Hint`], `${k}Hint`).toBeTruthy();
      }
    }
  });

  it("the settings request carries every mechanism as the form has it", () => {
    const off = Object.fromEntries(MECHANISM_KEYS.map((k) => [k, false]));
    const req = settingsRequest({ provider: "anthropic", baseUrl: "u", model: "m", autoApproveEdits: false, allowDeviceControl: false, constrainedCalls: "auto", ...mechanismsOf(off) });
    for (const k of fromRust) expect(req[k], k).toBe(false);
    expect(mechanismsOf({ archiveTools: false }).memory).toBe(true);
  });
});
