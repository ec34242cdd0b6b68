// Item: with no model provider set up, the panel does not send (it would go to a hosted
// provider without a key, retry and end in a network error); it says what is missing.
import { describe, expect, it, vi } from "vitest";
import { render } from "svelte/server";
import ChatPanel from "../src/chat/ChatPanel.svelte";
import { isLocalUrl, providerGap, type ProviderGap } from "../src/chat/protocol";
import { ChatStore, type ChatBackend } from "../src/chat/store.svelte";
import { strings } from "../src/chat/strings";
import type { SettingsView } from "../src/lib/wire/types.gen";

// ChatPanel takes the app's one store; the panel tests give it a stand-in.
const fake = vi.hoisted(() => ({ store: null as unknown }));
vi.mock("../src/chat/instance", () => ({ chatStore: () => fake.store }));

type Conn = Pick<SettingsView, "provider" | "baseUrl" | "model" | "hasApiKey">;
const TABLE: { why: string; s: Conn | null; gap: ProviderGap | null }[] = [
  { why: "never set up (the defaults: Anthropic, no key)", s: { provider: "anthropic", baseUrl: "https://api.anthropic.com", model: "claude-sonnet-4-5", hasApiKey: false }, gap: "noKey" },
  { why: "Anthropic with a key", s: { provider: "anthropic", baseUrl: "https://api.anthropic.com", model: "claude-sonnet-4-5", hasApiKey: true }, gap: null },
  { why: "OpenAI without a key", s: { provider: "openai-compatible", baseUrl: "https://api.openai.com/v1", model: "gpt-4o", hasApiKey: false }, gap: "noKey" },
  { why: "OpenRouter without a key", s: { provider: "openai-compatible", baseUrl: "https://openrouter.ai/api/v1", model: "x", hasApiKey: false }, gap: "noKey" },
  { why: "OpenAI with a key", s: { provider: "openai-compatible", baseUrl: "https://api.openai.com/v1", model: "gpt-4o", hasApiKey: true }, gap: null },
  { why: "Ollama on this computer, no key", s: { provider: "openai-compatible", baseUrl: "http://localhost:11434/v1", model: "llama3.2", hasApiKey: false }, gap: null },
  { why: "LM Studio on 127.0.0.1, no key", s: { provider: "openai-compatible", baseUrl: "http://127.0.0.1:1234/v1", model: "qwen", hasApiKey: false }, gap: null },
  { why: "a server on the LAN (192.168.x), no key", s: { provider: "openai-compatible", baseUrl: "http://192.168.1.20:8080/v1", model: "m", hasApiKey: false }, gap: null },
  { why: "a server on 10.x, no key", s: { provider: "openai-compatible", baseUrl: "http://10.0.0.5:8000/v1", model: "m", hasApiKey: false }, gap: null },
  { why: "a server on 172.20.x, no key", s: { provider: "openai-compatible", baseUrl: "http://172.20.0.2:8000/v1", model: "m", hasApiKey: false }, gap: null },
  { why: "a public 172.32.x address, no key", s: { provider: "openai-compatible", baseUrl: "http://172.32.0.2:8000/v1", model: "m", hasApiKey: false }, gap: "noKey" },
  { why: "IPv6 loopback, no key", s: { provider: "openai-compatible", baseUrl: "http://[::1]:8080/v1", model: "m", hasApiKey: false }, gap: null },
  { why: "a .local host, no key", s: { provider: "openai-compatible", baseUrl: "http://gpu-box.local:11434/v1", model: "m", hasApiKey: false }, gap: null },
  { why: "a bare LAN host name, no key", s: { provider: "openai-compatible", baseUrl: "http://gpu-box:11434/v1", model: "m", hasApiKey: false }, gap: null },
  { why: "a local Anthropic-style proxy, no key", s: { provider: "anthropic", baseUrl: "http://127.0.0.1:9000", model: "claude-e2e", hasApiKey: false }, gap: null },
  { why: "no base URL", s: { provider: "openai-compatible", baseUrl: "  ", model: "m", hasApiKey: true }, gap: "noUrl" },
  { why: "a base URL that is not a URL, no key", s: { provider: "openai-compatible", baseUrl: "api.openai.com", model: "m", hasApiKey: false }, gap: "noKey" },
  { why: "a local server with no model chosen", s: { provider: "openai-compatible", baseUrl: "http://localhost:11434/v1", model: "", hasApiKey: false }, gap: "noModel" },
  { why: "settings not read yet", s: null, gap: null },
];

describe("is the model provider set up?", () => {
  it.each(TABLE)("$why → $gap", ({ s, gap }) => {
    expect(providerGap(s)).toBe(gap);
  });

  it("local means this computer or the local network", () => {
    expect(isLocalUrl("http://localhost:1234/v1")).toBe(true);
    expect(isLocalUrl("http://169.254.1.1/v1")).toBe(true);
    expect(isLocalUrl("http://[fd00::1]:8080")).toBe(true);
    expect(isLocalUrl("https://api.deepseek.com/v1")).toBe(false);
    expect(isLocalUrl("https://8.8.8.8/v1")).toBe(false);
    expect(isLocalUrl("not a url")).toBe(false);
  });

  it("every gap has a plain sentence in English and Chinese, under one title", () => {
    expect(strings.en["chat.setup.title"]).toBe("Set up a model provider first");
    for (const g of ["noKey", "noUrl", "noModel"] as const) {
      for (const lang of ["en", "zh"] as const) expect(strings[lang][`chat.setup.${g}`].length).toBeGreaterThan(0);
    }
  });

  it("the store never sends a message or a retry while the provider is not set up", async () => {
    const sent: unknown[] = [];
    const backend: ChatBackend = {
      chat: async (req: { op: string }) => {
        sent.push(req);
        if (req.op === "create") return { id: 1 };
        if (req.op === "list") return [];
        return null;
      },
      onChat: () => () => {},
    } as unknown as ChatBackend;
    const store = new ChatStore(backend);
    store.settings = { provider: "anthropic", baseUrl: "https://api.anthropic.com", model: "claude-sonnet-4-5", hasApiKey: false } as SettingsView;
    expect(await store.send("add a gauge")).toBe(false);
    expect(sent.filter((r) => (r as { op: string }).op === "send")).toEqual([]);
    store.settings = { ...store.settings, hasApiKey: true };
    expect(await store.send("add a gauge")).toBe(true);
    expect(sent.filter((r) => (r as { op: string }).op === "send")).toHaveLength(1);
  });
});

// The panel itself: the prompt and a disabled Send whose tooltip says why.

describe("the panel when the provider is not set up", () => {
  const panelStore = (settings: Partial<SettingsView> | null) => ({
    settings, chats: [], current: null, running: false, error: "", degraded: null, items: [], models: [], search: null,
    canRetry: false, refreshList: async () => {}, loadSettings: async () => settings, loadHistory: async () => {},
  });
  it("asks to set up a provider and disables Send with that reason", () => {
    fake.store = panelStore({ provider: "anthropic", baseUrl: "https://api.anthropic.com", model: "claude-sonnet-4-5", hasApiKey: false, contextProbe: true });
    const { body } = render(ChatPanel, { props: { onclose: () => {} } });
    expect(body).toContain('data-testid="chat-needs-setup"');
    expect(body).toContain("Set up a model provider first");
    expect(body).toContain('data-testid="chat-setup-open"');
    const send = /<button[^>]*data-testid="chat-send"[^>]*>/.exec(body)?.[0] ?? "";
    expect(send).toContain("disabled");
    expect(send).toContain('title="Set up a model provider first"');
  });
  it("a local server without a key is not blocked", () => {
    fake.store = panelStore({ provider: "openai-compatible", baseUrl: "http://localhost:11434/v1", model: "llama3.2", hasApiKey: false, contextProbe: true });
    const { body } = render(ChatPanel, { props: { onclose: () => {} } });
    expect(body).not.toContain('data-testid="chat-needs-setup"');
    const send = /<button[^>]*data-testid="chat-send"[^>]*>/.exec(body)?.[0] ?? "";
    expect(send).not.toContain("title=");
  });
});

describe("the model's limits in the settings request", () => {
  it("sends a whole number a person typed, and null for empty or nonsense (automatic)", async () => {
    const { settingsRequest, limitValue } = await import("../src/chat/protocol");
    const base = { provider: "openai-compatible", baseUrl: " http://127.0.0.1:8080/v1 ", model: "m", autoApproveEdits: false, allowDeviceControl: false, constrainedCalls: "auto" } as const;
    const req = settingsRequest({ ...base, contextWindow: 16384, maxOutputTokens: null, maxToolCalls: undefined } as never);
    expect(req).toMatchObject({ contextWindow: 16384, maxOutputTokens: null, maxToolCalls: null });
    for (const [typed, sent] of [["2048", 2048], ["", null], ["  ", null], ["1.5", null], ["-3", null], ["abc", null], [4096, 4096]] as const) {
      expect(limitValue(typed)).toBe(sent);
    }
  });
});
