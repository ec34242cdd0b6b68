// Sentences about a count read right for every count in both languages ("1 model found",
// never "1 models found"), and every count sentence the UI uses has its forms.
import { afterEach, describe, expect, it } from "vitest";
import { dictionaries, tn } from "../src/lib/i18n/index.svelte";
import { settings } from "../src/lib/settings.svelte";

const sources = import.meta.glob(["../src/**/*.svelte", "../src/**/*.ts", "!../src/**/strings.ts"], {
  query: "?raw", import: "default", eager: true,
}) as Record<string, string>;

afterEach(() => {
  settings.language = "en";
});

describe("tn", () => {
  it("English: one for 1, other for 0, 2 and more", () => {
    settings.language = "en";
    expect(tn("chat.settings.modelsLoaded", 1, { name: "qwen2.5:7b" })).toBe("One model found: qwen2.5:7b.");
    expect(tn("chat.settings.modelsLoaded", 0)).toBe("0 models found.");
    expect(tn("chat.settings.modelsLoaded", 2)).toBe("2 models found.");
    expect(tn("project.tiles", 1)).toBe("1 tile");
    expect(tn("project.tiles", 12)).toBe("12 tiles");
    expect(tn("project.msg.dropOthers", 1)).toBe("(One more dropped file ignored: drop one project at a time.)");
    expect(tn("connect.fixFields", 3)).toBe("Fix the 3 marked fields first.");
  });

  it("Chinese: one form, with the count", () => {
    settings.language = "zh";
    expect(tn("chat.settings.modelsLoaded", 5)).toBe("找到 5 个模型。");
    expect(tn("chat.settings.modelsLoaded", 1, { name: "m" })).toBe(dictionaries.zh["chat.settings.modelsLoaded.other"].replace("{n}", "1"));
    expect(tn("project.tiles", 1)).toBe("1 个磁贴");
  });

  it("every count sentence the UI uses has a one and an other form in both languages", () => {
    const keys = new Set<string>();
    for (const text of Object.values(sources)) for (const m of text.matchAll(/\btn\(\s*"([^"]+)"/g)) keys.add(m[1]);
    expect(keys.size).toBeGreaterThanOrEqual(6);
    const missing = [...keys].flatMap((k) =>
      (["en", "zh"] as const).flatMap((lang) => [`${k}.one`, `${k}.other`].filter((f) => !(f in dictionaries[lang])).map((f) => `${lang}: ${f}`)),
    );
    expect(missing).toEqual([]);
  });
});
