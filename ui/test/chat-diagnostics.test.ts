// Item: the developer statistics (embedder ids, p50/p95 latencies) were on the first
// settings screen. They are under a collapsed "Diagnostics" section now, in plain words.
import { describe, expect, it } from "vitest";
import { render } from "svelte/server";
import ChatDiagnostics from "../src/chat/ChatDiagnostics.svelte";
import { strings } from "../src/chat/strings";

import settingsSource from "../src/chat/ChatSettings.svelte?raw";
import healthSource from "../src/chat/ChatHealth.svelte?raw";

const SOURCES: Record<string, string> = { "ChatSettings.svelte": settingsSource, "ChatHealth.svelte": healthSource };
const src = (f: string) => SOURCES[f];

/** Developer words no person should have to read in the health view. */
const JARGON = /p50|p95|embedder|lexicon|minilm|all-minilm|deterministic|circuit|half-open|process-wide|latency|revalidation|high-water|backlog|extraction|vector|embedding|熔断|向量|半开|闭合/i;

describe("the assistant's diagnostics", () => {
  it("the settings screen holds the health view only inside the Diagnostics section", () => {
    const settings = src("ChatSettings.svelte");
    expect(settings).not.toMatch(/<ChatHealth\b/);
    expect(settings).toMatch(/<ChatDiagnostics\b/);
  });

  it("Diagnostics is closed by default and loads nothing until opened", () => {
    const { body } = render(ChatDiagnostics, { props: { store: { loadHealth: async () => null } as never } });
    expect(body).toMatch(/<details[^>]*data-testid="chat-diagnostics"/);
    expect(body).not.toMatch(/<details[^>]*\sopen/);
    expect(body).toContain(">Diagnostics</summary>");
    expect(body).not.toContain('data-testid="chat-health"');
  });

  it.each(["en", "zh"] as const)("the health view's words are plain (%s)", (lang) => {
    const dict = strings[lang] as Record<string, string>;
    const health = Object.entries(dict).filter(([k]) => k.startsWith("chat.health.") || k.startsWith("chat.diagnostics."));
    expect(health.length).toBeGreaterThan(40);
    for (const [k, v] of health) expect(`${k}: ${v}`).not.toMatch(new RegExp(`: .*(${JARGON.source})`, "i"));
    expect(dict["chat.diagnostics.title"]).toBe(lang === "en" ? "Diagnostics" : "诊断");
  });

  it("the health view writes no column or cause as a developer id", () => {
    const health = src("ChatHealth.svelte");
    expect(health).not.toMatch(/>p50<|>p95<|>max</);
    expect(health).not.toMatch(/<code>\{cause\}<\/code>/);
  });
});
