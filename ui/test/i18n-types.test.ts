// The keys are typed: `npm run check` (svelte-check, which checks this folder too) fails on
// a key no table has, a count sentence without its forms, or a Chinese table missing a key.
// Each `@ts-expect-error` below is itself an error once the line it marks compiles.
import { afterEach, describe, expect, it } from "vitest";
import { dictionaries, keyOr, t, tn, tOr, type Key, type PluralKey } from "../src/lib/i18n/index.svelte";
import { settings } from "../src/lib/settings.svelte";
import type { Key as ShellKey } from "../src/lib/i18n/shell";

afterEach(() => {
  settings.language = "en";
});

describe("typed keys", () => {
  it("t takes only keys that exist", () => {
    // @ts-expect-error – no table has this key.
    expect(t("no.such.key")).toBe("no.such.key");
    expect(t("nav.connect")).toBe("Connect");
  });

  it("tn takes only the base of a key with .one and .other forms", () => {
    // @ts-expect-error – a form, not its base.
    tn("project.tiles.one", 1);
    // @ts-expect-error – a key without count forms.
    tn("nav.connect", 1);
    const base: PluralKey = "project.tiles";
    expect(tn(base, 2)).toBe("2 tiles");
  });

  it("a Chinese table must have every English key", () => {
    // @ts-expect-error – "nav.dashboard" and the rest are missing.
    const partial: Record<ShellKey, string> = { "nav.connect": "连接" };
    expect(partial["nav.connect"]).toBe("连接");
  });

  it("keys built at run time are checked when they are used", () => {
    const kind: string = "group";
    expect(keyOr(`import.kind.${kind}`, "import.kind.project")).toBe("import.kind.group");
    expect(keyOr("import.kind.somethingNew", "import.kind.project")).toBe("import.kind.project");
    // `Object.prototype`'s names are no keys.
    expect(keyOr("constructor", "common.save")).toBe("common.save" satisfies Key);
    expect(tOr("connect.type.tcp", "tcp")).toBe(dictionaries.en["connect.type.tcp"]);
    expect(tOr("connect.type.carrierPigeon", "carrierPigeon")).toBe("carrierPigeon");
    settings.language = "zh";
    expect(tOr("connect.type.tcp", "tcp")).toBe(dictionaries.zh["connect.type.tcp"]);
  });
});
