// The chat store against a fake chat service: protocol-shaped replies and events, in the
// order the service sends them (crates/assistant/src/service.rs, conversation.rs).
import { consentText } from "../src/lib/i18n/consent";
import { describe, expect, it } from "vitest";
import type { ChatEvent, ChatRequest } from "../src/lib/transport/types";
import { CommandError } from "../src/lib/transport/types";
import { ChatStore, MAX_TURN_EXTRAS, type ChatBackend } from "../src/chat/store.svelte";
import {
  baseUrlForProvider,
  DEFAULT_MODEL,
  modelForProvider,
  normalizeItems,
  normalizeTier,
  noticeText,
  prettyArgs,
  settingsRequest,
  summarizeResult,
  titleFrom,
  formatTokens,
  commandCall,
  commandName,
  chatMarkdown,
  degradedText,
  verificationOf,
  type ChatItem,
} from "../src/chat/protocol";

/** A request as the fake sees it: any op, any field readable. */
type Seen = ChatRequest & Record<string, unknown>;
type Handler = (req: Seen) => unknown;

class FakeService implements ChatBackend {
  requests: Seen[] = [];
  handlers: Record<string, Handler> = {};
  listeners = new Set<(e: ChatEvent) => void>();
  /** Requests whose reply the test releases by hand. */
  held: { req: Seen; release: () => void }[] = [];
  hold = new Set<string>();

  async chat<T>(req: ChatRequest): Promise<T> {
    this.requests.push(req);
    if (this.hold.has(req.op)) await new Promise<void>((release) => this.held.push({ req, release }));
    const h = this.handlers[req.op];
    if (!h) return null as T;
    return (await h(req)) as T;
  }
  onChat(handler: (e: ChatEvent) => void) {
    this.listeners.add(handler);
    return () => this.listeners.delete(handler);
  }
  emit(chat: number, type: string, fields: Record<string, unknown> = {}) {
    for (const h of this.listeners) h({ chat, type, ...fields } as ChatEvent);
  }
  ops(op: string) {
    return this.requests.filter((r) => r.op === op);
  }
}

const flush = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
};

const summary = (id: number, title: string, running = false) => ({ id, title, createdUnixMs: id, updatedUnixMs: id, events: 0, running });

/** A store with chats 1 and 2, chat 1 open with an empty history. */
async function setup(history: Record<number, unknown> = {}) {
  const svc = new FakeService();
  svc.handlers.list = () => [summary(2, "Other"), summary(1, "Gauges")];
  svc.handlers.history = (r) => history[r.chat as number] ?? { items: [], running: false, approvals: [] };
  const store = new ChatStore(svc);
  const off = store.start();
  await flush();
  await store.select(1);
  return { svc, store, off };
}

const types = (items: ChatItem[]) => items.map((i) => i.type);
const card = (store: ChatStore, id: string) => store.items.find((i) => i.type === "toolCard" && i.id === id) as Extract<ChatItem, { type: "toolCard" }>;

describe("chat store: chats", () => {
  it("lists chats and opens one with its history (snake- or camelCase item types)", async () => {
    const { svc, store } = await setup({
      1: {
        items: [
          { type: "user", seq: 1, text: "add a gauge" },
          { type: "assistant", seq: 2, text: "Adding it." },
          { type: "tool_card", seq: 3, id: "c1", name: "project.dataset.add", args: { title: "rpm" }, status: "ok", result: "{\"id\":\"ds-3\"}" },
          { type: "toolCard", seq: 4, id: "c2", name: "io.send", args: { data: "x" }, status: "pending", result: null },
          { type: "compaction", seq: 5, through: 2, summary: "earlier" },
          { type: "notice", seq: 6, kind: "checkpoint_created", payload: {} },
        ],
        running: true,
        approvals: [{ chat: 1, type: "approvalRequested", callId: "c2", name: "io.send", args: { data: "x" }, tier: "DeviceGated" }],
      },
    });
    expect(store.chats.map((c) => c.id)).toEqual([2, 1]);
    expect(svc.ops("history")).toEqual([{ op: "history", chat: 1 }]);
    expect(types(store.items)).toEqual(["user", "assistant", "toolCard", "toolCard", "compaction", "notice"]);
    expect(card(store, "c1")).toMatchObject({ status: "ok", result: '{"id":"ds-3"}', key: "cc1", approval: null });
    // The open prompt from `approvals` marks its card.
    expect(card(store, "c2")).toMatchObject({ status: "awaiting", approval: { tier: "deviceGated", answering: false } });
    expect(store.running).toBe(true);
    expect(store.chats.find((c) => c.id === 1)!.running).toBe(true);
  });

  it("creates, renames and deletes chats", async () => {
    const { svc, store } = await setup();
    let next = 3;
    svc.handlers.create = () => ({ id: next++ });
    svc.handlers.list = () => [summary(3, "New"), summary(2, "Other"), summary(1, "Gauges")];
    expect(await store.create("  New  ")).toBe(3);
    expect(svc.ops("create")).toEqual([{ op: "create", title: "New" }]);
    expect(store.current).toBe(3);
    expect(await store.rename(2, " Renamed ")).toBe(true);
    expect(svc.ops("rename")).toEqual([{ op: "rename", chat: 2, title: "Renamed" }]);
    expect(store.chats.find((c) => c.id === 2)!.title).toBe("Renamed");
    expect(await store.rename(2, "   ")).toBe(false);
    svc.handlers.list = () => [summary(2, "Renamed"), summary(1, "Gauges")];
    expect(await store.remove(3)).toBe(true);
    expect(svc.ops("delete")).toEqual([{ op: "delete", chat: 3 }]);
    expect(store.current).toBeNull();
    expect(store.items).toEqual([]);
    expect(store.chats.map((c) => c.id)).toEqual([2, 1]);
  });

  it("shows a refusal verbatim and keeps the chat", async () => {
    const { svc, store } = await setup();
    svc.handlers.delete = () => {
      throw new CommandError({ code: "turnRunning", message: "chat 1 already has a turn running" });
    };
    expect(await store.remove(1)).toBe(false);
    expect(store.error).toBe("Could not delete the chat: chat 1 already has a turn running");
    expect(store.current).toBe(1);
    store.clearError();
    expect(store.error).toBe("");
  });

  it("a message sent while a new chat is being created goes to that chat", async () => {
    const { svc, store } = await setup();
    svc.hold.add("create");
    svc.handlers.create = () => ({ id: 5 });
    const created = store.create();
    await flush();
    const sent = store.send("hello new chat");
    svc.handlers.list = () => [summary(5, "New"), summary(2, "Other"), summary(1, "Gauges")];
    svc.held[0].release();
    await Promise.all([created, sent]);
    expect(svc.ops("create")).toHaveLength(1);
    expect(svc.ops("send")).toEqual([{ op: "send", chat: 5, text: "hello new chat" }]);
    expect(store.current).toBe(5);
    expect(store.items).toMatchObject([{ type: "user", text: "hello new chat" }]);
  });

  it("a chat made with a stand-in title is named after its first message", async () => {
    const { svc, store } = await setup();
    svc.handlers.create = () => ({ id: 7 });
    await store.create("New chat", true);
    expect(svc.ops("create")).toEqual([{ op: "create", title: "New chat" }]);
    await store.send("Why is the temperature flat?");
    await flush();
    expect(svc.ops("rename")).toEqual([{ op: "rename", chat: 7, title: "Why is the temperature flat?" }]);
    // Only once.
    svc.emit(7, "turnEnded", { end: "finished", detail: "end_turn" });
    await flush();
    await store.send("and the pressure?");
    await flush();
    expect(svc.ops("rename")).toHaveLength(1);
  });

  it("a list answered late neither hides a new chat nor closes it", async () => {
    const { svc, store } = await setup();
    svc.hold.add("list");
    const stale = store.refreshList();
    await flush();
    svc.hold.delete("list");
    svc.handlers.create = () => ({ id: 6 });
    const fresh = [summary(6, "New"), summary(2, "Other"), summary(1, "Gauges")];
    svc.handlers.list = () => fresh;
    await store.create();
    expect(store.chats.map((c) => c.id)).toEqual([6, 2, 1]);
    // The old request answers with the old list.
    svc.handlers.list = () => [summary(2, "Other"), summary(1, "Gauges")];
    svc.held[0].release();
    await stale;
    expect(store.chats.map((c) => c.id)).toEqual([6, 2, 1]);
    expect(store.current).toBe(6);
  });

  it("a chat deleted elsewhere is closed on the next list", async () => {
    const { svc, store } = await setup();
    svc.handlers.list = () => [summary(2, "Other")];
    await store.refreshList();
    expect(store.current).toBeNull();
    expect(store.items).toEqual([]);
  });

  it("sending without an open chat creates one titled after the message", async () => {
    const svc = new FakeService();
    svc.handlers.list = () => (svc.ops("create").length ? [summary(9, "Plot the")] : []);
    svc.handlers.create = () => ({ id: 9 });
    const store = new ChatStore(svc);
    store.start();
    await flush();
    expect(await store.send("Plot the temperature of every sensor in one workspace please\nthanks")).toBe(true);
    // Cut at a word boundary (titleFrom), never mid-word.
    expect(svc.ops("create")).toEqual([{ op: "create", title: "Plot the temperature of every sensor in one…" }]);
    expect(svc.ops("send")).toEqual([{ op: "send", chat: 9, text: "Plot the temperature of every sensor in one workspace please\nthanks" }]);
    expect(store.current).toBe(9);
  });
});

describe("chat store: a turn", () => {
  it("streams text into one assistant message; a call ends it, later text starts another", async () => {
    const { svc, store } = await setup();
    expect(await store.send("  add a gauge for rpm ")).toBe(true);
    expect(svc.ops("send")).toEqual([{ op: "send", chat: 1, text: "add a gauge for rpm" }]);
    expect(store.items).toMatchObject([{ type: "user", text: "add a gauge for rpm", seq: null }]);
    expect(store.running).toBe(true);
    expect(store.chats.find((c) => c.id === 1)!.running).toBe(true);
    // A second message while the turn runs is not sent.
    expect(await store.send("again")).toBe(false);

    svc.emit(1, "textDelta", { text: "I'll add " });
    svc.emit(1, "textDelta", { text: "a **gauge**." });
    expect(types(store.items)).toEqual(["user", "assistant"]);
    expect(store.items[1]).toMatchObject({ text: "I'll add a **gauge**.", streaming: true });

    svc.emit(1, "toolCallStarted", { id: "c1", name: "project_dataset_add" });
    expect(store.items[1]).toMatchObject({ streaming: false });
    expect(card(store, "c1")).toMatchObject({ status: "pending", name: "project_dataset_add", args: undefined });
    svc.emit(1, "textDelta", { text: "Done" });
    expect(types(store.items)).toEqual(["user", "assistant", "toolCard", "assistant"]);
    expect(store.items[3]).toMatchObject({ text: "Done", streaming: true });
  });

  it("a silent server shows how long the turn waits; the next word ends the wait", async () => {
    const { svc, store } = await setup();
    await store.send("how is the supply?");
    svc.emit(1, "waiting", { seconds: 10 });
    expect(store.waiting).toBe(10);
    svc.emit(1, "waiting", { seconds: 20 });
    expect(store.waiting).toBe(20);
    svc.emit(1, "textDelta", { text: "3.3 V" });
    expect(store.waiting).toBeNull();
    svc.emit(1, "waiting", { seconds: 10 });
    svc.emit(1, "turnEnded", { end: "failed", detail: "no data for 120 s" });
    expect(store.waiting).toBeNull();
  });

  it("a server without tools and a cut reply are notices that say what happened", () => {
    const items = normalizeItems([
      { type: "notice", seq: 1, kind: "tools_unavailable", payload: { model: "SmolLM2", baseUrl: "http://127.0.0.1:8080/v1" } },
      { type: "notice", seq: 2, kind: "reply_cut", payload: { reason: "repetition", unit: "开始", repeats: 120 } },
      { type: "notice", seq: 3, kind: "reply_cut", payload: { reason: "max_tokens", limit: 1024 } },
    ]);
    expect(items.map((i) => noticeText(i as any))).toMatchObject([
      { key: "chat.notice.toolsUnavailable", vars: { model: "SmolLM2" }, level: "warn" },
      { key: "chat.notice.cutRepetition", level: "warn" },
      { key: "chat.notice.cutLength", vars: { n: "1024" }, level: "warn" },
    ]);
  });

  it("a call that asks for approval, is approved and succeeds", async () => {
    const { svc, store } = await setup();
    await store.send("add a gauge");
    svc.emit(1, "toolCallStarted", { id: "toolu_1", name: "project_dataset_add" });
    svc.emit(1, "toolCallPending", { id: "toolu_1", name: "project_dataset_add", args: { groupId: "g-1", title: "rpm", widget: "gauge" } });
    expect(card(store, "toolu_1")).toMatchObject({ status: "pending", args: { groupId: "g-1", title: "rpm", widget: "gauge" } });
    svc.emit(1, "toolCallRunning", { id: "toolu_1" });
    expect(card(store, "toolu_1").status).toBe("running");
    svc.emit(1, "approvalRequested", { callId: "toolu_1", name: "project.dataset.add", args: { groupId: "g-1", title: "rpm", widget: "gauge" }, tier: "Confirm" });
    expect(card(store, "toolu_1")).toMatchObject({ status: "awaiting", approval: { tier: "confirm", answering: false } });

    svc.hold.add("approve");
    const answering = store.approve("toolu_1");
    await flush();
    expect(svc.ops("approve")).toEqual([{ op: "approve", chat: 1, callId: "toolu_1" }]);
    expect(card(store, "toolu_1").approval).toMatchObject({ answering: true });
    svc.emit(1, "approvalResolved", { callId: "toolu_1", approved: true });
    svc.held[0].release();
    await answering;
    expect(card(store, "toolu_1")).toMatchObject({ status: "running", approval: null });
    svc.emit(1, "toolCallDone", { id: "toolu_1", status: "ok", content: '{"id":"ds-7"}' });
    expect(card(store, "toolu_1")).toMatchObject({ status: "ok", result: '{"id":"ds-7"}', approval: null });
    // Still one card for the call.
    expect(store.items.filter((i) => i.type === "toolCard")).toHaveLength(1);
  });

  it("a call that touches a device carries its question as data, worded in the person's language", async () => {
    const { svc, store } = await setup();
    await store.send("connect");
    const question = { kind: "connects", programs: [], sends: [{ kind: "action", title: "Wake", payload: "W", hex: false, lineEnding: "none", onConnect: true, everyMs: null, to: "" }] };
    svc.emit(1, "approvalRequested", { callId: "c5", name: "io.connect", args: {}, tier: "deviceGated", question });
    const approval = card(store, "c5").approval!;
    expect(approval).toMatchObject({ tier: "deviceGated", question });
    expect(consentText(approval.question!)).toBe("Connecting this project sends without a click: “Wake” sends “W” when it connects. Allow it?");
    // An older backend's words (a string) are not taken for the question's data.
    svc.emit(1, "approvalRequested", { callId: "c6", name: "io.connect", args: {}, tier: "deviceGated", question: "connect?" });
    expect(card(store, "c6").approval!.question).toBeUndefined();
  });

  it("a meta_executeCommand call awaiting approval shows the command it runs and that command's arguments", async () => {
    const { svc, store } = await setup();
    await store.send("rename the project");
    svc.emit(1, "toolCallStarted", { id: "t1", name: "meta_executeCommand" });
    svc.emit(1, "toolCallPending", { id: "t1", name: "meta_executeCommand", args: { name: "project.setTitle", params: { title: "Rig" } } });
    expect(commandCall(card(store, "t1").name, card(store, "t1").args)).toEqual({ name: "project.setTitle", args: { title: "Rig" } });
    svc.emit(1, "approvalRequested", { callId: "t1", name: "project.setTitle", args: { title: "Rig" }, tier: "Confirm" });
    expect(card(store, "t1")).toMatchObject({ name: "project.setTitle", args: { title: "Rig" }, status: "awaiting" });
  });

  it("a denied call", async () => {
    const { svc, store } = await setup();
    await store.send("send hello to the device");
    svc.emit(1, "toolCallPending", { id: "c9", name: "io_send", args: { data: "hello" } });
    svc.emit(1, "toolCallRunning", { id: "c9" });
    svc.emit(1, "approvalRequested", { callId: "c9", name: "io.send", args: { data: "hello" }, tier: "DeviceGated" });
    expect(card(store, "c9").approval).toMatchObject({ tier: "deviceGated" });
    await store.deny("c9", " not now ");
    expect(svc.ops("deny")).toEqual([{ op: "deny", chat: 1, callId: "c9", reason: "not now" }]);
    svc.emit(1, "approvalResolved", { callId: "c9", approved: false });
    expect(card(store, "c9").approval).toBeNull();
    svc.emit(1, "toolCallDone", { id: "c9", status: "denied", content: "Error: denied: not now" });
    expect(card(store, "c9")).toMatchObject({ status: "denied", result: "Error: denied: not now" });
    await store.deny("c9");
    expect(svc.ops("deny")[1]).toEqual({ op: "deny", chat: 1, callId: "c9" });
  });

  it("a refused answer lets the person try again", async () => {
    const { svc, store } = await setup();
    await store.send("x");
    svc.emit(1, "approvalRequested", { callId: "c1", name: "project.group.add", args: {}, tier: "Confirm" });
    svc.handlers.approve = () => {
      throw new CommandError({ code: "noPendingApproval", message: "no approval is pending for call `c1`" });
    };
    await store.approve("c1");
    expect(card(store, "c1").approval).toMatchObject({ answering: false });
    expect(store.error).toMatch(/^The assistant could not do that: no approval is pending/);
  });

  it("approve all answers the Confirm prompts only", async () => {
    const { svc, store } = await setup();
    await store.send("set it up");
    svc.emit(1, "approvalRequested", { callId: "a", name: "project.group.add", args: {}, tier: "Confirm" });
    svc.emit(1, "approvalRequested", { callId: "b", name: "io.send", args: {}, tier: "DeviceGated" });
    svc.hold.add("approveAll");
    const p = store.approveAll();
    await flush();
    expect(svc.ops("approveAll")).toEqual([{ op: "approveAll", chat: 1 }]);
    expect(card(store, "a").approval!.answering).toBe(true);
    expect(card(store, "b").approval!.answering).toBe(false);
    svc.held[0].release();
    await p;
    svc.emit(1, "approvalResolved", { callId: "a", approved: true });
    expect(card(store, "a").approval).toBeNull();
    expect(card(store, "b").status).toBe("awaiting");
  });

  it("a stopped turn keeps its token use, marked as an estimate", async () => {
    const { svc, store } = await setup();
    await store.send("hi");
    svc.emit(1, "textDelta", { text: "Hello, let me" });
    svc.emit(1, "usage", { inputTokens: 900, outputTokens: 1, cacheReadTokens: 0, cacheCreationTokens: 0 });
    svc.emit(1, "usage", { inputTokens: 0, outputTokens: 4, cacheReadTokens: 0, cacheCreationTokens: 0, estimated: true });
    expect(store.turnUsage).toEqual({ inputTokens: 900, outputTokens: 5, cacheReadTokens: 0, cacheCreationTokens: 0, estimated: true });
    svc.handlers.history = () => ({
      items: [
        { type: "user", seq: 1, text: "hi" },
        { type: "assistant", seq: 2, text: "Hello, let me" },
        { type: "notice", seq: 3, kind: "usage", payload: { model: "m", inputTokens: 900, outputTokens: 4, cacheReadTokens: 0, cacheCreationTokens: 0, estimated: true } },
        { type: "notice", seq: 4, kind: "turn_cancelled", payload: { partialToolCalls: [] } },
      ],
      running: false,
      approvals: [],
    });
    svc.emit(1, "turnEnded", { end: "cancelled", detail: null });
    await flush();
    const usage = store.items.find((i) => i.type === "usage") as Extract<ChatItem, { type: "usage" }> | undefined;
    expect(usage?.usage).toMatchObject({ outputTokens: 4, estimated: true });
  });

  it("turnEnded stops the turn and re-reads the history, keeping the turn's usage", async () => {
    const { svc, store } = await setup();
    await store.send("hi");
    svc.emit(1, "textDelta", { text: "Hello" });
    svc.emit(1, "usage", { inputTokens: 1200, outputTokens: 40, cacheReadTokens: 1000, cacheCreationTokens: 0 });
    svc.emit(1, "usage", { inputTokens: 1300, outputTokens: 10, cacheReadTokens: 1100, cacheCreationTokens: 5 });
    expect(store.turnUsage).toEqual({ inputTokens: 2500, outputTokens: 50, cacheReadTokens: 2100, cacheCreationTokens: 5 });
    svc.handlers.history = () => ({
      items: [
        { type: "user", seq: 1, text: "hi" },
        { type: "assistant", seq: 2, text: "Hello!" },
      ],
      running: false,
      approvals: [],
    });
    svc.emit(1, "turnEnded", { end: "finished", detail: "end_turn" });
    expect(store.running).toBe(false);
    expect(store.items[1]).toMatchObject({ streaming: false });
    await flush();
    expect(svc.ops("history")).toHaveLength(2);
    // The truth replaces the live view; the usage stays after the turn.
    expect(types(store.items)).toEqual(["user", "assistant", "usage"]);
    expect(store.items[1]).toMatchObject({ seq: 2, text: "Hello!" });
    expect(store.items[2]).toMatchObject({ usage: { inputTokens: 2500, outputTokens: 50, cacheReadTokens: 2100, cacheCreationTokens: 5 } });
    expect(store.turnUsage).toBeNull();
    // The list was re-read too.
    expect(svc.ops("list").length).toBeGreaterThanOrEqual(2);

    // The next turn's extras go after the next user message's turn; earlier ones stay.
    await store.send("again");
    svc.emit(1, "usage", { inputTokens: 10, outputTokens: 1, cacheReadTokens: 0, cacheCreationTokens: 0 });
    svc.handlers.history = () => ({
      items: [
        { type: "user", seq: 1, text: "hi" },
        { type: "assistant", seq: 2, text: "Hello!" },
        { type: "user", seq: 3, text: "again" },
        { type: "assistant", seq: 4, text: "Sure." },
      ],
      running: false,
      approvals: [],
    });
    svc.emit(1, "turnEnded", { end: "finished", detail: "end_turn" });
    await flush();
    expect(types(store.items)).toEqual(["user", "assistant", "usage", "user", "assistant", "usage"]);
    expect(store.items[5]).toMatchObject({ usage: { inputTokens: 10 } });
  });

  it("keeps the usage of the newest MAX_TURN_EXTRAS finished turns only", async () => {
    const { svc, store } = await setup();
    const n = MAX_TURN_EXTRAS + 3;
    const log: { type: string; seq: number; text: string }[] = [];
    // The service's usage rows are left out of the log, so each row shown is this page's own.
    svc.handlers.history = () => ({ items: [...log], running: false, approvals: [] });
    for (let i = 0; i < n; i++) {
      await store.send(`q${i}`);
      svc.emit(1, "usage", { inputTokens: i + 1, outputTokens: 1, cacheReadTokens: 0, cacheCreationTokens: 0 });
      log.push({ type: "user", seq: 2 * i + 1, text: `q${i}` }, { type: "assistant", seq: 2 * i + 2, text: `a${i}` });
      svc.emit(1, "turnEnded", { end: "finished", detail: "end_turn" });
      await flush();
    }
    const usage = store.items.filter((i) => i.type === "usage") as Extract<ChatItem, { type: "usage" }>[];
    expect(usage).toHaveLength(MAX_TURN_EXTRAS);
    // The three oldest turns lost theirs; the newest kept its own.
    expect(usage[0].usage.inputTokens).toBe(4);
    expect(usage.at(-1)!.usage.inputTokens).toBe(n);
    expect(store.items.at(-1)).toMatchObject({ type: "usage" });
    expect(store.items.at(-2)).toMatchObject({ type: "assistant", text: `a${n - 1}` });
  });

  it("a failed turn shows its detail once, and the history's notice replaces it", async () => {
    const { svc, store } = await setup();
    await store.send("hi");
    svc.hold.add("history");
    svc.emit(1, "turnEnded", { end: "failed", detail: "provider: 401 invalid x-api-key" });
    expect(store.items.at(-1)).toMatchObject({ type: "turnEnd", end: "failed", detail: "provider: 401 invalid x-api-key" });
    expect(noticeText(store.items.at(-1) as any)).toMatchObject({ key: "chat.fail.auth", level: "error", detail: "", technical: "provider: 401 invalid x-api-key" });
    svc.handlers.history = () => ({
      items: [
        { type: "user", seq: 1, text: "hi" },
        { type: "notice", seq: 2, kind: "turn_failed", payload: { error: "provider: 401 invalid x-api-key", transient: false, partialToolCalls: [] } },
      ],
      running: false,
      approvals: [],
    });
    await flush();
    svc.held.forEach((h) => h.release());
    await flush();
    expect(types(store.items)).toEqual(["user", "notice"]);
    expect(noticeText(store.items[1] as any)).toMatchObject({ key: "chat.fail.auth", technical: "provider: 401 invalid x-api-key" });
  });

  it("a turn stopped at the call limit keeps its notice when the history has none", async () => {
    const { svc, store } = await setup();
    await store.send("loop");
    svc.handlers.history = () => ({ items: [{ type: "user", seq: 1, text: "loop" }], running: false, approvals: [] });
    svc.emit(1, "turnEnded", { end: "toolCallLimit", detail: "25" });
    await flush();
    expect(store.items).toMatchObject([{ type: "user" }, { type: "turnEnd", end: "toolCallLimit", detail: "25" }]);
    expect(noticeText(store.items[1] as any)).toMatchObject({ key: "chat.notice.limit", vars: { n: "25" }, level: "warn" });
  });

  it("stop sends cancel for the open chat", async () => {
    const { svc, store } = await setup();
    await store.send("x");
    await store.cancel();
    expect(svc.ops("cancel")).toEqual([{ op: "cancel", chat: 1 }]);
  });

  it("a refused send takes the message back", async () => {
    const { svc, store } = await setup();
    svc.handlers.send = () => {
      throw new CommandError({ code: "provider", message: "could not set up the provider client: no API key" });
    };
    expect(await store.send("hello")).toBe(false);
    expect(store.items).toEqual([]);
    expect(store.running).toBe(false);
    expect(store.error).toBe("The message was not sent: could not set up the provider client: no API key");
  });

  it("events of another chat only mark the list", async () => {
    const { svc, store } = await setup();
    svc.emit(2, "textDelta", { text: "elsewhere" });
    svc.emit(2, "toolCallPending", { id: "z", name: "io_status", args: {} });
    svc.emit(2, "approvalRequested", { callId: "z", name: "io.status", args: {}, tier: "Confirm" });
    expect(store.items).toEqual([]);
    expect(store.running).toBe(false);
    expect(store.chats.find((c) => c.id === 2)!.running).toBe(true);
    expect(store.anyRunning).toBe(true);
    svc.emit(2, "turnEnded", { end: "finished", detail: "end_turn" });
    await flush();
    expect(store.chats.find((c) => c.id === 2)!.running).toBe(false);
    expect(svc.ops("history")).toEqual([{ op: "history", chat: 1 }]);
    expect(store.items).toEqual([]);
  });

  it("approval records from the log sit on their cards; live answers show at once", async () => {
    const { svc, store } = await setup({
      1: {
        items: [
          { type: "user", seq: 1, text: "add two" },
          { type: "toolCard", seq: 2, id: "a", name: "project.group.add", args: {}, status: "ok", result: "{}" },
          { type: "notice", seq: 3, kind: "approval", payload: { callId: "a", approved: true, by: "approveAll", reason: null } },
          { type: "toolCard", seq: 5, id: "b", name: "io.write", args: {}, status: "denied", result: "Error: denied" },
          { type: "notice", seq: 6, kind: "approval", payload: { callId: "b", approved: false, by: "person", reason: "wrong port" } },
          { type: "notice", seq: 7, kind: "approval", payload: { callId: "gone", approved: true, by: "person" } },
        ],
        running: false,
        approvals: [],
      },
    });
    expect(types(store.items)).toEqual(["user", "toolCard", "toolCard", "notice"]);
    expect(card(store, "a").decision).toEqual({ approved: true, by: "approveAll", reason: null });
    expect(card(store, "b").decision).toEqual({ approved: false, by: "person", reason: "wrong port" });
    svc.emit(1, "toolCallPending", { id: "c", name: "project_group_add", args: { title: "X" } });
    svc.emit(1, "approvalRequested", { callId: "c", name: "project.group.add", args: { title: "X" }, tier: "Confirm" });
    expect(card(store, "c").decision).toBeNull();
    svc.emit(1, "approvalResolved", { callId: "c", approved: false, by: "timeout", reason: "no answer" });
    expect(card(store, "c").decision).toEqual({ approved: false, by: "timeout", reason: "no answer" });
    expect(card(store, "c").approval).toBeNull();
  });

  it("a chat opened mid-reply shows the streamed text once, whatever deltas arrive", async () => {
    const { svc, store } = await setup({
      1: {
        items: [{ type: "user", seq: 1, text: "How is the supply?" }],
        running: true,
        approvals: [],
        streaming: { text: "Voltage: 3.3", end: 12 },
      },
    });
    expect(types(store.items)).toEqual(["user", "assistant"]);
    // Deltas the snapshot already had are skipped, a straddling one is trimmed.
    svc.emit(1, "textDelta", { text: "Voltage: ", at: 0 });
    svc.emit(1, "textDelta", { text: "3.3 V", at: 9 });
    svc.emit(1, "textDelta", { text: " ✓", at: 14 });
    const reply = store.items.at(-1) as Extract<ChatItem, { type: "assistant" }>;
    expect(reply.text).toBe("Voltage: 3.3 V ✓");
    expect(reply.streaming).toBe(true);
    // The next turn counts from 0 again and is not trimmed.
    svc.handlers.history = () => ({
      items: [{ type: "user", seq: 1, text: "How is the supply?" }, { type: "assistant", seq: 2, text: "Voltage: 3.3 V ✓" }],
      running: false,
      approvals: [],
      streaming: null,
    });
    svc.emit(1, "turnEnded", { end: "finished", detail: "end_turn" });
    await flush();
    svc.handlers.send = () => null;
    await store.send("And the current?");
    svc.emit(1, "textDelta", { text: "Fine", at: 0 });
    expect((store.items.at(-1) as Extract<ChatItem, { type: "assistant" }>).text).toBe("Fine");
  });

  it("a failed turn offers a retry that runs without a new message; an answered one does not", async () => {
    const { svc, store } = await setup({
      1: {
        items: [
          { type: "user", seq: 1, text: "How is the supply?" },
          { type: "assistant", seq: 2, text: "Checking the " },
          { type: "notice", seq: 3, kind: "turn_failed", payload: { error: "connection reset" } },
        ],
        running: false,
        approvals: [],
      },
    });
    expect(store.canRetry).toBe(true);
    svc.handlers.retry = () => null;
    expect(await store.retry()).toBe(true);
    expect(svc.ops("retry")).toEqual([{ op: "retry", chat: 1 }]);
    expect(svc.ops("send")).toEqual([]);
    expect(store.running).toBe(true);
    expect(store.canRetry).toBe(false);
    svc.emit(1, "textDelta", { text: "The supply reads 3.3 V.", at: 0 });
    svc.handlers.history = () => ({
      items: [
        { type: "user", seq: 1, text: "How is the supply?" },
        { type: "assistant", seq: 2, text: "Checking the " },
        { type: "notice", seq: 3, kind: "turn_failed", payload: {} },
        { type: "assistant", seq: 4, text: "The supply reads 3.3 V." },
      ],
      running: false,
      approvals: [],
    });
    svc.emit(1, "turnEnded", { end: "finished", detail: "end_turn" });
    await flush();
    expect(store.canRetry).toBe(false);
  });

  it("a refused retry gives the chat back", async () => {
    const { svc, store } = await setup({
      1: { items: [{ type: "user", seq: 1, text: "hi" }], running: false, approvals: [] },
    });
    expect(store.canRetry).toBe(true);
    svc.handlers.retry = () => {
      throw new CommandError({ code: "not_allowed", message: "chat 1 has nothing to retry" });
    };
    expect(await store.retry()).toBe(false);
    expect(store.running).toBe(false);
    expect(store.error).toContain("nothing to retry");
  });

  it("each turn's token use comes from the log, summed over its replies, shown once", async () => {
    const u = (input: number, output: number, cacheRead = 0) => ({
      type: "notice", kind: "usage", payload: { model: "m", inputTokens: input, outputTokens: output, cacheReadTokens: cacheRead, cacheCreationTokens: 0 },
    });
    const history = (running: boolean) => ({
      items: [
        { type: "user", seq: 1, text: "first" },
        { seq: 2, ...u(100, 10) },
        { type: "toolCard", seq: 3, id: "a", name: "io.status", args: {}, status: "ok", result: "up" },
        { seq: 5, ...u(50, 5, 900) },
        { type: "assistant", seq: 6, text: "done" },
        { type: "user", seq: 7, text: "second" },
        { seq: 8, ...u(7, 1) },
      ],
      running,
      approvals: [],
    });
    const { svc, store } = await setup({ 1: history(false) });
    expect(types(store.items)).toEqual(["user", "toolCard", "assistant", "usage", "user", "usage"]);
    const rows = store.items.filter((i) => i.type === "usage") as Extract<ChatItem, { type: "usage" }>[];
    expect(rows[0].usage).toEqual({ inputTokens: 150, outputTokens: 15, cacheReadTokens: 900, cacheCreationTokens: 0 });
    expect(rows[1].usage.inputTokens).toBe(7);
    // While the second turn runs, its usage so far is not a finished turn's row.
    svc.handlers.history = () => history(true);
    await store.loadHistory();
    expect(types(store.items)).toEqual(["user", "toolCard", "assistant", "usage", "user"]);
    // The turn ends: the page's own count does not double the log's.
    svc.emit(1, "usage", { inputTokens: 7, outputTokens: 1, cacheReadTokens: 0, cacheCreationTokens: 0 });
    svc.handlers.history = () => history(false);
    svc.emit(1, "turnEnded", { end: "finished", detail: "end_turn" });
    await flush();
    expect(types(store.items)).toEqual(["user", "toolCard", "assistant", "usage", "user", "usage"]);
  });

  it("a resync after a reconnect re-reads the list and the open chat", async () => {
    const { svc, store } = await setup({
      1: { items: [{ type: "user", seq: 1, text: "hi" }, { type: "assistant", seq: 2, text: "done meanwhile" }], running: false, approvals: [] },
    });
    const lists = svc.ops("list").length;
    svc.emit(-1, "resync");
    await flush();
    expect(svc.ops("list").length).toBe(lists + 1);
    expect(svc.ops("history")).toEqual([{ op: "history", chat: 1 }, { op: "history", chat: 1 }]);
    expect(types(store.items)).toEqual(["user", "assistant"]);
  });

  it("events that arrive while the history is read are applied on top of it", async () => {
    const { svc, store } = await setup();
    svc.hold.add("history");
    svc.handlers.history = () => ({
      items: [
        { type: "user", seq: 1, text: "hi" },
        { type: "toolCard", seq: 2, id: "c1", name: "project.get", args: {}, status: "pending", result: null },
      ],
      running: true,
      approvals: [],
    });
    const loading = store.select(2).then(() => store.select(1));
    await flush();
    // Reading chat 1 again (the select(2) read was released below).
    svc.held.forEach((h) => h.release());
    await flush();
    expect(store.loading).toBe(true);
    svc.emit(1, "toolCallDone", { id: "c1", status: "ok", content: "{}" });
    svc.emit(1, "textDelta", { text: "Here" });
    expect(store.items.some((i) => i.type === "assistant")).toBe(false);
    svc.held.forEach((h) => h.release());
    await loading;
    expect(store.loading).toBe(false);
    expect(types(store.items)).toEqual(["user", "toolCard", "assistant"]);
    expect(card(store, "c1")).toMatchObject({ status: "ok", result: "{}" });
    expect(store.running).toBe(true);
  });

  it("a message sent while the history is on its way survives its arrival", async () => {
    const { svc, store } = await setup();
    svc.hold.add("history");
    const reading = store.loadHistory();
    await flush();
    await store.send("quick");
    svc.held.forEach((h) => h.release());
    await reading;
    expect(store.items).toMatchObject([{ type: "user", text: "quick", seq: null }]);
    expect(store.running).toBe(true);
  });

  it("stops listening when told", async () => {
    const { svc, store, off } = await setup();
    off();
    svc.emit(1, "textDelta", { text: "x" });
    expect(store.items).toEqual([]);
  });
});

describe("chat store: settings", () => {
  const saved = { provider: "anthropic", baseUrl: "https://api.anthropic.com", model: "claude-sonnet-4-5", autoApproveEdits: false, allowDeviceControl: false, hasApiKey: true, keyStorage: "keyring" };

  it("loads and saves; the key only when typed, null to forget it", async () => {
    const { svc, store } = await setup();
    svc.handlers.getSettings = () => saved;
    svc.handlers.setSettings = (r) => ({ ...saved, ...r, op: undefined, apiKey: undefined, hasApiKey: r.apiKey === null ? false : true });
    expect(await store.loadSettings()).toEqual(saved);
    const form = { provider: "openai-compatible" as const, baseUrl: " http://localhost:11434/v1 ", model: "llama3.2", autoApproveEdits: true, allowDeviceControl: false, memory: true, contextProbe: true, handoffSeeding: false, skillRouting: true, autoVerify: false, archiveTools: true, focusPrompt: true, intentNarrowing: false, toolResultCompression: true, topicCompaction: false, topicMarker: false, constrainedCalls: "on" as const };
    await store.saveSettings(form);
    expect(svc.ops("setSettings")[0]).toEqual({ op: "setSettings", provider: "openai-compatible", baseUrl: "http://localhost:11434/v1", model: "llama3.2", autoApproveEdits: true, allowDeviceControl: false, memory: true, contextProbe: true, handoffSeeding: false, skillRouting: true, autoVerify: false, archiveTools: true, focusPrompt: true, intentNarrowing: false, toolResultCompression: true, topicCompaction: false, topicMarker: false, constrainedCalls: "on", contextWindow: null, maxOutputTokens: null, maxToolCalls: null });
    await store.saveSettings(form, "  ");
    expect("apiKey" in svc.ops("setSettings")[1]).toBe(false);
    await store.saveSettings(form, " sk-123 ");
    expect(svc.ops("setSettings")[2].apiKey).toBe("sk-123");
    await store.saveSettings(form, null);
    expect(svc.ops("setSettings")[3].apiKey).toBeNull();
    expect(store.settings!.hasApiKey).toBe(false);
  });

  it("tells the assistant the UI's language and keeps the answer", async () => {
    const { svc, store } = await setup();
    svc.handlers.setSettings = (r) => ({ ...saved, language: r.language });
    expect(await store.setLanguage("zh")).toBe(true);
    expect(svc.ops("setSettings")).toEqual([{ op: "setSettings", language: "zh" }]);
    expect(store.settings!.language).toBe("zh");
  });

  it("lists models, storing the connection fields first when asked", async () => {
    const { svc, store } = await setup();
    svc.handlers.setSettings = (r) => ({ ...saved, provider: r.provider, baseUrl: r.baseUrl });
    svc.handlers.listModels = () => [{ id: "gpt-4.1", displayName: "GPT-4.1" }, { id: "o3" }];
    expect(await store.loadModels({ provider: "openai-compatible", baseUrl: "https://api.openai.com/v1", apiKey: "" })).toBe(true);
    expect(svc.ops("setSettings")).toEqual([{ op: "setSettings", provider: "openai-compatible", baseUrl: "https://api.openai.com/v1" }]);
    expect(store.models).toEqual([{ id: "gpt-4.1", displayName: "GPT-4.1" }, { id: "o3", displayName: "o3" }]);
    svc.handlers.listModels = () => {
      throw new CommandError({ code: "provider", message: "401" });
    };
    expect(await store.loadModels()).toBe(false);
    expect(store.error).toBe("Could not load the models: 401");
    expect(store.models).toHaveLength(2);
  });
});

describe("chat helpers", () => {
  it("tiers in any spelling", () => {
    expect(["Confirm", "DeviceGated", "device_gated", "AlwaysConfirm", "Safe", "Blocked", null, "x"].map(normalizeTier)).toEqual([
      "confirm", "deviceGated", "deviceGated", "alwaysConfirm", "safe", "blocked", "unknown", "unknown",
    ]);
  });

  it("base URL defaults follow the provider unless customised", () => {
    expect(baseUrlForProvider("https://api.anthropic.com/", "anthropic", "openai-compatible")).toBe("https://api.openai.com/v1");
    expect(baseUrlForProvider("", "anthropic", "openai-compatible")).toBe("https://api.openai.com/v1");
    expect(baseUrlForProvider("https://api.openai.com/v1", "openai-compatible", "anthropic")).toBe("https://api.anthropic.com");
    expect(baseUrlForProvider("http://localhost:11434/v1", "openai-compatible", "anthropic")).toBe("http://localhost:11434/v1");
  });

  it("switching provider never keeps the old provider's model", () => {
    // Anthropic's model is not something an OpenAI-compatible server serves: none is
    // assumed there (the list, once loaded, picks its first).
    expect(modelForProvider("claude-sonnet-4-5", "anthropic", "openai-compatible")).toBe("");
    expect(modelForProvider("qwen2.5:7b", "openai-compatible", "anthropic")).toBe(DEFAULT_MODEL.anthropic);
    expect(DEFAULT_MODEL.anthropic).toBe("claude-sonnet-4-5");
    // Switching back brings back the model this provider had.
    expect(modelForProvider("", "openai-compatible", "anthropic", { anthropic: "claude-haiku-4-5" })).toBe("claude-haiku-4-5");
    expect(modelForProvider("x", "anthropic", "openai-compatible", { "openai-compatible": "  " })).toBe("");
    // No switch: the model stays.
    expect(modelForProvider("claude-opus-4", "anthropic", "anthropic", { anthropic: "other" })).toBe("claude-opus-4");
  });

  it("result summaries: first lines, errors marked", () => {
    expect(summarizeResult("a\nb\nc", 2)).toEqual({ text: "a\nb", truncated: true, error: false });
    expect(summarizeResult("Error: no such dataset `ds-9`\n")).toEqual({ text: "Error: no such dataset `ds-9`", truncated: false, error: true });
    expect(summarizeResult(null)).toEqual({ text: "", truncated: false, error: false });
    expect(summarizeResult("x".repeat(1000)).text).toHaveLength(600);
  });

  it("command names as the person knows them", () => {
    expect(commandName("project_dataset_add", {})).toBe("project.dataset.add");
    expect(commandName("project.dataset.add", {})).toBe("project.dataset.add");
    expect(commandName("meta_executeCommand", { name: "io_send", params: {} })).toBe("io.send");
    expect(commandName("meta_executeCommand", undefined)).toBe("meta_executeCommand");
    expect(commandName("meta_listCommands", {})).toBe("meta_listCommands");
  });

  it("a meta_executeCommand card is about the inner command and its own arguments", () => {
    const params = { groupId: "g-1", dataset: { title: "RPM", index: 3 } };
    expect(commandCall("meta_executeCommand", { name: "project.dataset.add", params })).toEqual({ name: "project.dataset.add", args: params });
    expect(commandCall("meta.executeCommand", { name: "project_dataset_add", params })).toEqual({ name: "project.dataset.add", args: params });
    // Params as a JSON string (weak models send that; the backend accepts it) read alike.
    expect(commandCall("meta_executeCommand", { name: "io.send", params: '{"data":"ping"}' })).toEqual({ name: "io.send", args: { data: "ping" } });
    // No params: the command runs with none.
    expect(commandCall("meta_executeCommand", { name: "io.status" })).toEqual({ name: "io.status", args: {} });
    // Still streaming, or malformed: the wrapper as the model wrote it.
    expect(commandCall("meta_executeCommand", undefined)).toEqual({ name: "meta_executeCommand", args: undefined });
    expect(commandCall("meta_executeCommand", { params: {} })).toEqual({ name: "meta_executeCommand", args: { params: {} } });
    // The prompt already named the inner command; the arguments are still the wrapper's.
    expect(commandCall("project.setTitle", { name: "project.setTitle", params: { title: "Rig" } })).toEqual({ name: "project.setTitle", args: { title: "Rig" } });
    // A command whose own parameter is called `name` is not mistaken for a wrapper.
    expect(commandCall("project.group.update", { name: "Engine", params: {} })).toEqual({ name: "project.group.update", args: { name: "Engine", params: {} } });
    // Any other tool keeps its own arguments.
    expect(commandCall("project_setTitle", { title: "Rig" })).toEqual({ name: "project.setTitle", args: { title: "Rig" } });
  });

  it("titles, args, tokens, request shapes", () => {
    expect(titleFrom("  short one \n second")).toBe("short one");
    expect(prettyArgs(undefined)).toBe("");
    expect(prettyArgs({ a: 1 })).toBe('{\n  "a": 1\n}');
    expect([950, 12_345, 1_500, 2_500_000].map(formatTokens)).toEqual(["950", "12k", "1.5k", "2.5M"]);
    expect(settingsRequest({ provider: "anthropic", baseUrl: "u", model: "m", autoApproveEdits: false, allowDeviceControl: true, memory: true, contextProbe: false, handoffSeeding: true, skillRouting: false, autoVerify: true, archiveTools: true, focusPrompt: true, intentNarrowing: true, toolResultCompression: true, topicCompaction: true, topicMarker: true, constrainedCalls: "auto" })).not.toHaveProperty("apiKey");
  });

  it("unknown history items become notices instead of vanishing; duplicate call ids get their own keys", () => {
    const items = normalizeItems([
      { type: "skill_card", seq: 1, x: 1 },
      { type: "tool_card", seq: 2, id: "a", name: "n", args: {}, status: "interrupted", result: null },
      { type: "tool_card", seq: 3, id: "a", name: "n", args: {}, status: "weird", result: null },
      null,
    ]);
    expect(items.map((i) => [i.type, i.key])).toEqual([["notice", "s1"], ["toolCard", "ca"], ["toolCard", "s3"]]);
    expect(items[0]).toMatchObject({ kind: "skillCard" });
    expect(items[1]).toMatchObject({ status: "interrupted" });
    expect(items[2]).toMatchObject({ status: "error" });
    expect(noticeText(items[0] as any)).toMatchObject({ key: "chat.notice.other", vars: { kind: "skillCard" } });
  });
});

describe("chat store: context health and handoff", () => {
  const sentinelFree = [
    { type: "user", seq: 1, text: "rename the project" },
    { type: "toolCard", seq: 2, id: "c1", name: "project_setTitle", args: { title: "Bench A" }, status: "ok", result: "{}" },
    { type: "notice", seq: 3, kind: "checkpoint_created", payload: { id: 7, callId: "c1", command: "project.setTitle" } },
    { type: "assistant", seq: 4, text: "Renamed." },
    { type: "notice", seq: 5, kind: "probe_verdict", payload: { verdict: "mutated", drift: "idsfresh", degraded: true } },
  ];

  it("verdicts are not rows, the checkpoint sits on its card, the banner comes from `degraded`", async () => {
    const { store } = await setup({
      1: { items: sentinelFree, running: false, approvals: [], degraded: { verdict: "mutated", drift: "idsfresh", seq: 5 } },
    });
    expect(types(store.items)).toEqual(["user", "toolCard", "assistant"]);
    expect(card(store, "c1").checkpoint).toBe(7);
    expect(store.degraded).toEqual({ verdict: "mutated", drift: "idsfresh", seq: 5 });
    // Another chat is not degraded; opening it clears the banner.
    await store.select(2);
    expect(store.degraded).toBeNull();
  });

  it("a turn asked again because the context was too small reads as that, not as a failure", () => {
    const items = normalizeItems([
      { type: "user", seq: 1, text: "how do I use MQTT?" },
      { type: "notice", seq: 2, kind: "turn_failed", payload: { error: "request (2445 tokens) exceeds the available context size (2048 tokens)" } },
      { type: "notice", seq: 3, kind: "context_reduced", payload: { limit: 2048 } },
      { type: "assistant", seq: 4, text: "Add an MQTT source." },
      { type: "notice", seq: 5, kind: "context_lean", payload: { window: 2048 } },
    ]);
    expect(types(items)).toEqual(["user", "notice", "assistant", "notice"]);
    expect(noticeText(items[1] as any)).toMatchObject({ key: "chat.notice.contextReduced", vars: { n: "2048" }, level: "warn" });
    expect(noticeText(items[3] as any)).toMatchObject({ key: "chat.notice.contextLean", vars: { n: "2048" }, level: "info" });
    // A failure nothing recovered from stays one.
    const failed = normalizeItems([{ type: "user", seq: 1, text: "hi" }, { type: "notice", seq: 2, kind: "turn_failed", payload: { error: "x" } }]);
    expect(types(failed)).toEqual(["user", "notice"]);
  });

  it("an old checkpoint record without a call stays a notice", () => {
    const items = normalizeItems([{ type: "notice", seq: 1, kind: "checkpoint_created", payload: { id: 3 } }]);
    expect(types(items)).toEqual(["notice"]);
  });

  it("starting a chat from the handoff opens the new chat", async () => {
    const { svc, store } = await setup();
    svc.handlers.newChatFromHandoff = () => ({ id: 3 });
    svc.handlers.list = () => [summary(3, "Gauges (continued)"), summary(2, "Other"), summary(1, "Gauges")];
    expect(await store.fromHandoff(1, "Gauges (continued)")).toBe(3);
    expect(svc.ops("newChatFromHandoff")).toEqual([{ op: "newChatFromHandoff", chat: 1, title: "Gauges (continued)" }]);
    expect(store.current).toBe(3);
    expect(store.chats[0].id).toBe(3);
  });

  it("a refused handoff keeps the open chat and says why", async () => {
    const { svc, store } = await setup();
    svc.handlers.newChatFromHandoff = () => {
      throw new CommandError({ code: "notFound", message: "no chat 1; list the chats to see which exist" });
    };
    expect(await store.fromHandoff(1)).toBeNull();
    expect(store.current).toBe(1);
    expect(store.error).toContain("no chat 1");
  });

  it("the banner names the drifted anchor, or how the line went wrong", () => {
    expect(degradedText({ verdict: "missing", drift: null, seq: 1 })).toEqual({ key: "chat.probe.missing", vars: {} });
    expect(degradedText({ verdict: "mutated", drift: "idsfresh", seq: 1 })).toEqual({ key: "chat.probe.mutated", vars: { anchor: "idsfresh" } });
    expect(degradedText({ verdict: "mutated", drift: "format", seq: 1 }).key).toBe("chat.probe.mutatedFormat");
    expect(degradedText({ verdict: "mutated", drift: "truncated", seq: 1 }).key).toBe("chat.probe.mutatedTruncated");
  });

  it("the handoff seed is a notice that shows the digest", () => {
    const [item] = normalizeItems([{ type: "notice", seq: 1, kind: "handoff_seeded", payload: { from: 4, digest: "Chat: IMU\nLast questions:\n- hi" } }]);
    expect(noticeText(item as Extract<ChatItem, { type: "notice" }>)).toEqual({ key: "chat.notice.handoff", vars: {}, level: "info", detail: "Chat: IMU\nLast questions:\n- hi" });
  });

  it("an export is the chat as the person sees it", () => {
    const md = chatMarkdown("Bench", normalizeItems(sentinelFree), { you: "You", assistant: "Assistant" });
    expect(md).toBe('# Bench\n\n**You:** rename the project\n\n- `project.setTitle` {"title":"Bench A"} → ok\n\n**Assistant:** Renamed.\n');
  });
});

describe("chat store: skills and auto-verify", () => {
  it("a skill the app loaded is a chip on the message, not a card", () => {
    const items = normalizeItems([
      { type: "user", seq: 1, text: "write a frame parser" },
      { type: "toolCard", seq: 2, id: "sxt_skill_frame_parsers", name: "meta_loadSkill", args: { name: "frame-parsers" }, status: "ok", result: "{}" },
      { type: "notice", seq: 4, kind: "skill_loaded", payload: { skill: "frame-parsers", title: "Frame parsers", callId: "sxt_skill_frame_parsers", synthetic: true } },
      { type: "assistant", seq: 5, text: "Here is how." },
    ]);
    expect(types(items)).toEqual(["user", "assistant"]);
    expect((items[0] as Extract<ChatItem, { type: "user" }>).skill).toEqual({ id: "frame-parsers", title: "Frame parsers" });
  });

  it("the check folded into a result reads as pass or fail; errors and plain results have none", () => {
    expect(verificationOf(JSON.stringify({ ok: true, verification: { ok: false, method: "project.frameParser.dryCompile", detail: "does not compile: line 3: x" } })))
      .toEqual({ ok: false, method: "project.frameParser.dryCompile", detail: "does not compile: line 3: x" });
    expect(verificationOf('{"ok":true,"verification":{"ok":true,"method":"project.validate","detail":"the project validates"}}')?.ok).toBe(true);
    expect(verificationOf('{"ok":true}')).toBeNull();
    expect(verificationOf("Error: no such source")).toBeNull();
    expect(verificationOf("not json")).toBeNull();
    expect(verificationOf(null)).toBeNull();
  });

  it("restoring a checkpoint runs assistant.restore as the person's confirmed call", async () => {
    const { svc, store } = await setup();
    const calls: unknown[][] = [];
    (svc as unknown as { call: (...a: unknown[]) => Promise<unknown> }).call = async (...a: unknown[]) => {
      calls.push(a);
      return { ok: true };
    };
    expect(await store.restore(4)).toBe(true);
    expect(calls).toEqual([["assistant.restore", { id: 4 }, true]]);
  });
});
