// Every string file has the same keys in English and Chinese, no Chinese string is empty
// or a stand-in, placeholders match, and every key the screens use exists.
import { describe, expect, it } from "vitest";
import { dictionaries as typed } from "../src/lib/i18n/index.svelte";
import { strings as screens } from "../src/screens/strings";
import { strings as dashboard } from "../src/dashboard/strings";
import { strings as shell } from "../src/lib/i18n/shell";
import { strings as chat } from "../src/chat/strings";
import { CARD_STATUSES, PROVIDERS, noticeText, type ChatItem } from "../src/chat/protocol";
import { PARSER_KINDS, SOURCE_TYPES } from "../src/screens/connection";
import * as enums from "../src/screens/project/enums";

// Looked up by any string: these checks are about what exists at run time.
const dictionaries: Record<"en" | "zh", Record<string, string>> = typed;
const files = { screens, dashboard, shell, chat };
const placeholders = (s: string) => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();

describe("i18n dictionaries", () => {
  it("en and zh have identical key sets overall", () => {
    expect(Object.keys(dictionaries.zh).sort()).toEqual(Object.keys(dictionaries.en).sort());
  });

  for (const [name, s] of Object.entries(files)) {
    it(`${name}: en and zh have identical key sets`, () => {
      const en = Object.keys(s.en).sort();
      const zh = Object.keys(s.zh).sort();
      expect(zh.filter((k) => !(k in s.en)), "keys only in zh").toEqual([]);
      expect(en.filter((k) => !(k in s.zh)), "keys only in en").toEqual([]);
    });
  }

  it("no file redefines another file's key", () => {
    const seen = new Map<string, string>();
    const dupes: string[] = [];
    for (const [name, s] of Object.entries(files)) {
      for (const k of Object.keys(s.en)) {
        if (seen.has(k)) dupes.push(`${k} (${seen.get(k)} and ${name})`);
        seen.set(k, name);
      }
    }
    expect(dupes).toEqual([]);
  });

  it("no zh value is empty, the key, or a stand-in", () => {
    const bad = Object.entries(dictionaries.zh).filter(
      ([k, v]) => !v.trim() || v === k || /\b(todo|tbd|fixme|xxx)\b/i.test(v) || /^\?+$/.test(v.trim()),
    );
    expect(bad).toEqual([]);
  });

  it("no en value is empty or the key", () => {
    expect(Object.entries(dictionaries.en).filter(([k, v]) => !v.trim() || v === k)).toEqual([]);
  });

  it("zh is translated: long English sentences are not copied verbatim", () => {
    const copied = Object.entries(dictionaries.en)
      // Acronyms and code (NMEA 0183, CR LF) may stay; ordinary words may not.
      .filter(([k, v]) => (v.match(/\b[A-Za-z]*[a-z][A-Za-z]{2,}\b/g) ?? []).length >= 2 && dictionaries.zh[k] === v)
      .map(([k]) => k);
    expect(copied).toEqual([]);
  });

  it("en and zh use the same {placeholders}", () => {
    const diff = Object.keys(dictionaries.en).filter((k) => JSON.stringify(placeholders(dictionaries.en[k])) !== JSON.stringify(placeholders(dictionaries.zh[k] ?? "")));
    expect(diff).toEqual([]);
  });
});

// Every screen source as text (Vite's glob import works under Vitest; no Node types needed).
const sourceFiles = import.meta.glob(["../src/screens/**/*.svelte", "../src/screens/**/*.ts", "!../src/screens/strings.ts"], {
  query: "?raw", import: "default", eager: true,
}) as Record<string, string>;

const chatSources = import.meta.glob(["../src/chat/**/*.svelte", "../src/chat/**/*.ts", "../src/App.svelte", "!../src/chat/strings.ts"], {
  query: "?raw", import: "default", eager: true,
}) as Record<string, string>;

describe("keys used by the screens", () => {
  it("every literal t(\"…\") key of the chat panel and the shell exists", () => {
    expect(Object.keys(chatSources).length).toBeGreaterThan(5);
    const missing: string[] = [];
    for (const [p, text] of Object.entries(chatSources)) {
      for (const m of text.matchAll(/\bt\(\s*"([^"]+)"/g)) if (!(m[1] in dictionaries.en)) missing.push(`${m[1]} in ${p}`);
    }
    expect(missing).toEqual([]);
  });

  it("every literal t(\"…\") key exists", () => {
    expect(Object.keys(sourceFiles).length).toBeGreaterThan(10);
    const missing: string[] = [];
    for (const [p, text] of Object.entries(sourceFiles)) {
      for (const m of text.matchAll(/\bt\(\s*"([^"]+)"/g)) if (!(m[1] in dictionaries.en)) missing.push(`${m[1]} in ${p}`);
    }
    expect(missing).toEqual([]);
  });

  it("every key a screen builds from a prefix and a value exists", () => {
    const need = [
      ...SOURCE_TYPES.map((x) => `connect.type.${x}`),
      ...PARSER_KINDS.map((x) => `parser.kind.${x}`),
      ...PARSER_KINDS.map((x) => `parser.desc.${x}`),
      ...["none", "even", "odd", "mark", "space"].map((x) => `connect.parity.${x}`),
      ...["none", "rtsCts", "xonXoff"].map((x) => `connect.flow.${x}`),
      ...["coil", "discrete", "holding", "input"].map((x) => `connect.reg.${x}`),
      ...["connecting", "connected", "reconnecting", "error", "finished", "closed", "unknown"].map((x) => `connect.state.${x}`),
      ...enums.GROUP_WIDGETS.map((x) => `widget.group.${x}`),
      ...enums.DATASET_WIDGETS.map((x) => `widget.dataset.${x}`),
      ...enums.LINE_ENDINGS.map((x) => `project.le.${x}`),
      ...enums.SEVERITIES.map((x) => `project.sev.${x}`),
      ...enums.TRANSFORM_LANGUAGES.map((x) => `project.tl.${x}`),
      ...enums.FRAME_MODES.map((x) => `project.fm.${x}`),
      ...enums.DELIMITER_FORMATS.map((x) => `project.df.${x}`),
      ...enums.DECODERS.map((x) => `project.dec.${x}`),
    ];
    expect(need.filter((k) => !(k in dictionaries.en))).toEqual([]);
  });

  it("every key the chat panel builds from a prefix and a value exists", () => {
    const tiers = ["safe", "confirm", "deviceGated", "alwaysConfirm", "blocked", "unknown"];
    const notices: Extract<ChatItem, { type: "notice" | "turnEnd" }>[] = [
      ...["turn_failed", "tool_call_limit", "turn_cancelled", "partial_tool_calls", "checkpoint_created", "skill_loaded"].map(
        (kind) => ({ type: "notice" as const, key: "k", seq: 1, kind, payload: {} }),
      ),
      ...(["finished", "toolCallLimit", "cancelled", "failed"] as const).map((end) => ({ type: "turnEnd" as const, key: "k", end, detail: null })),
    ];
    const need = [
      ...CARD_STATUSES.map((x) => `chat.status.${x}`),
      ...tiers.map((x) => `chat.tier.${x}`),
      ...tiers.map((x) => `chat.tierHint.${x}`),
      ...PROVIDERS.map((x) => `chat.provider.${x}`),
      ...notices.map((n) => noticeText(n).key),
      ...["approved", "denied"].flatMap((a) =>
        ["person", "approveAll", "timeout", "cancelled", "turnEnded"].map((by) => `chat.decision.${a}.${by}`),
      ),
      "common.delete",
      "common.save",
    ];
    expect(need.filter((k) => !(k in dictionaries.en))).toEqual([]);
  });

  it("the string keys the connection helpers return exist", async () => {
    const { baudError, portError } = await import("../src/screens/connection");
    const keys = [baudError("x"), baudError("0"), portError("x"), portError("0"), "connect.err.required"];
    expect(keys.filter((k) => !k || !(k in dictionaries.en))).toEqual([]);
  });
});
