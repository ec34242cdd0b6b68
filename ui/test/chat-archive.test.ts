// The chat archive in the UI: search requests and pages (ArchiveSearch), citing hits into
// the open chat and opening a chat at a hit (ChatStore), and the citation's row
// (normalizeItems) – against a fake chat service that answers in the door's shapes
// (crates/assistant/src/door.rs: searchSessions, cite, history).
import { describe, expect, it } from "vitest";
import type { ChatEvent, ChatRequest } from "../src/lib/transport/types";
import { CommandError } from "../src/lib/transport/types";
import { ChatStore, type ChatBackend } from "../src/chat/store.svelte";
import { ArchiveSearch, isStale, searchRequest } from "../src/chat/archive.svelte";
import { chatMarkdown, normalizeItems, normalizeSources, type ChatItem } from "../src/chat/protocol";
import type { SearchHit } from "../src/lib/wire/types.gen";

/** A request as the fake sees it: any op, any field readable. */
type Seen = ChatRequest & Record<string, unknown>;
type Handler = (req: Seen) => unknown;

class FakeService implements ChatBackend {
  requests: Seen[] = [];
  handlers: Record<string, Handler> = {};
  commands: { command: string; params: unknown }[] = [];
  listeners = new Set<(e: ChatEvent) => void>();
  /** Replies released by hand, in the order the test chooses. */
  held: { req: Seen; release: () => void }[] = [];
  hold = false;

  async chat<T>(req: ChatRequest): Promise<T> {
    this.requests.push(req);
    if (this.hold) await new Promise<void>((release) => this.held.push({ req, release }));
    const h = this.handlers[req.op];
    return (h ? await h(req) : null) as T;
  }
  async call<T>(command: string, params?: unknown): Promise<T> {
    this.commands.push({ command, params });
    return { path: "/projects/bench.ssproj" } as T;
  }
  onChat(handler: (e: ChatEvent) => void) {
    this.listeners.add(handler);
    return () => this.listeners.delete(handler);
  }
  ops(op: string) {
    return this.requests.filter((r) => r.op === op);
  }
}

const flush = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
};

const hit = (chat: number, seq: number, text = "rpm gauge"): SearchHit => ({
  chat,
  chatTitle: `Chat ${chat}`,
  project: null,
  seq,
  unixMs: 1_700_000_000_000 + seq,
  kind: "user_message",
  role: "user",
  // The generated type adds an index signature to the enum; the value is the plain string.
  surface: "current" as SearchHit["surface"],
  snippet: [{ text: "add an " }, { text, hit: true }],
});

describe("archive search requests", () => {
  it("leaves the surfaces out when all three are asked, and keeps their order otherwise", () => {
    const all = searchRequest("  rpm  ", ["log_only", "current", "shadowed"], { scope: "all" }, null, 20);
    expect(all).toEqual({ op: "searchSessions", query: "rpm", filter: { visibility: { scope: "all" } }, limit: 20 });
    const some = searchRequest("rpm", ["log_only", "current"], { scope: "project", project: "/p.ssproj" }, "abc.def", 5);
    expect(some).toEqual({
      op: "searchSessions",
      query: "rpm",
      filter: { visibility: { scope: "project", project: "/p.ssproj" }, surfaces: ["current", "log_only"] },
      limit: 5,
      cursor: "abc.def",
    });
  });

  it("tells the archive's 'changed since this search' from other errors", () => {
    expect(isStale("the archive changed since this search; search again")).toBe(true);
    expect(isStale("this cursor is damaged or was not issued by this Sextant")).toBe(false);
  });
});

describe("ArchiveSearch", () => {
  it("reads page one, then appends the next page with the cursor it was given", async () => {
    const svc = new FakeService();
    svc.handlers.searchSessions = (r) => (r.cursor ? { hits: [hit(2, 9)], nextCursor: null, generation: 4 } : { hits: [hit(1, 3)], nextCursor: "c1", generation: 4 });
    const search = new ArchiveSearch(svc, { limit: 1 });
    search.query = "rpm";
    await search.run();
    expect(search.hits.map((h) => [h.chat, h.seq])).toEqual([[1, 3]]);
    expect(search.nextCursor).toBe("c1");
    await search.more();
    expect(svc.ops("searchSessions")[1]).toMatchObject({ query: "rpm", cursor: "c1", limit: 1 });
    expect(search.hits.map((h) => [h.chat, h.seq])).toEqual([[1, 3], [2, 9]]);
    expect(search.nextCursor).toBeNull();
    await search.more();
    expect(svc.ops("searchSessions")).toHaveLength(2);
  });

  it("says 'search again' when the archive changed, and keeps the hits it had", async () => {
    const svc = new FakeService();
    svc.handlers.searchSessions = (r) => {
      if (r.cursor) throw new CommandError({ code: "failed", message: "the archive changed since this search; search again" });
      return { hits: [hit(1, 3)], nextCursor: "c1", generation: 1 };
    };
    const search = new ArchiveSearch(svc);
    search.query = "rpm";
    await search.run();
    await search.more();
    expect(search.stale).toBe(true);
    expect(search.error).toContain("search again");
    expect(search.nextCursor).toBeNull();
    expect(search.hits).toHaveLength(1);
    // Searching again starts over, with no stale mark.
    svc.handlers.searchSessions = () => ({ hits: [hit(1, 3), hit(1, 7)], nextCursor: null, generation: 2 });
    await search.run();
    expect(search.stale).toBe(false);
    expect(search.error).toBe("");
    expect(search.hits).toHaveLength(2);
  });

  it("drops an answer that comes back after a newer search started", async () => {
    const svc = new FakeService();
    svc.handlers.searchSessions = (r) => ({ hits: [hit(r.query === "old" ? 1 : 2, 1)], nextCursor: null, generation: 1 });
    svc.hold = true;
    const search = new ArchiveSearch(svc);
    search.query = "old";
    const first = search.run();
    search.query = "new";
    const second = search.run();
    await flush();
    // The newer answer first, then the older one: the older one must not replace it.
    svc.held[1].release();
    await second;
    svc.held[0].release();
    await first;
    expect(search.hits.map((h) => h.chat)).toEqual([2]);
    expect(search.loading).toBe(false);
  });

  it("asks nothing for an empty query, and scopes to the open project when asked", async () => {
    const svc = new FakeService();
    svc.handlers.searchSessions = () => ({ hits: [], nextCursor: null, generation: 1 });
    const search = new ArchiveSearch(svc, { project: async () => "/projects/bench.ssproj" });
    search.query = "   ";
    await search.run();
    expect(svc.requests).toHaveLength(0);
    expect(search.searched).toBe(false);
    search.query = "rpm";
    search.scope = "project";
    await search.run();
    expect(svc.ops("searchSessions")[0].filter).toEqual({ visibility: { scope: "project", project: "/projects/bench.ssproj" } });
    expect(search.searched).toBe(true);
  });
});

describe("citing and opening hits", () => {
  const summary = (id: number, title: string) => ({ id, title, createdUnixMs: id, updatedUnixMs: id, events: 0, running: false, project: null });

  async function setup() {
    const svc = new FakeService();
    svc.handlers.list = () => [summary(2, "Bench"), summary(1, "Gauges")];
    const histories: Record<number, unknown[]> = { 1: [{ type: "user", seq: 0, text: "hi" }], 2: [] };
    svc.handlers.history = (r) => ({ items: histories[r.chat as number] ?? [], running: false, approvals: [] });
    const store = new ChatStore(svc);
    store.start();
    await flush();
    await store.select(2);
    return { svc, store, histories };
  }

  it("cites hits into the open chat and shows the citation as one card", async () => {
    const { svc, store, histories } = await setup();
    svc.handlers.cite = () => {
      histories[2] = [
        { type: "citation", seq: 0, by: "person", sources: [{ chat: 1, title: "Gauges", project: null, cited: [0], units: 1, omittedUnits: 0, bytes: 300 }] },
        { type: "user", seq: 1, text: "Cited an earlier chat as background: “Gauges” (event 0)." },
      ];
      return { seq: 0, sources: [], message: "Cited an earlier chat as background: “Gauges” (event 0)." };
    };
    const cited = await store.cite([hit(1, 0)]);
    expect(cited?.seq).toBe(0);
    expect(svc.ops("cite")).toEqual([{ op: "cite", chat: 2, hits: [{ chat: 1, seq: 0 }] }]);
    // The history was read again: the card, with the readable message folded into it.
    expect(store.items.map((i) => i.type)).toEqual(["citation"]);
    const card = store.items[0] as Extract<ChatItem, { type: "citation" }>;
    expect(card.message).toContain("Gauges");
    expect(card.sources[0]).toMatchObject({ chat: 1, title: "Gauges", cited: [0] });
  });

  it("cites nothing without an open chat, while a turn runs, or with no hits; says why when refused", async () => {
    const { svc, store } = await setup();
    expect(await store.cite([])).toBeNull();
    store.running = true;
    expect(await store.cite([hit(1, 0)])).toBeNull();
    store.running = false;
    await store.select(null);
    expect(await store.cite([hit(1, 0)])).toBeNull();
    expect(svc.ops("cite")).toHaveLength(0);
    await store.select(2);
    svc.handlers.cite = () => {
      throw new CommandError({ code: "badRequest", message: "a citation names at most 3 chats; this one names 4" });
    };
    expect(await store.cite([hit(1, 0)])).toBeNull();
    expect(store.error).toContain("at most 3 chats");
  });

  it("opens a chat at a hit: selects it and keeps where to scroll until the chat shows it", async () => {
    const { store } = await setup();
    await store.openAt(1, 0);
    expect(store.current).toBe(1);
    expect(store.focus).toEqual({ chat: 1, seq: 0 });
    // Opening another chat plainly forgets it.
    await store.select(2);
    expect(store.focus).toBeNull();
  });

  it("asks the open project's file for a project-scoped search", async () => {
    const { svc, store } = await setup();
    expect(await store.openProject()).toBe("/projects/bench.ssproj");
    expect(svc.commands).toEqual([{ command: "project.file", params: {} }]);
  });
});

describe("the citation row", () => {
  it("folds a person's readable message into its card; an assistant's citation stands alone", () => {
    const sources = [{ chat: 4, title: "Parser", project: "/p.ssproj", cited: [7, 9], units: 3, omittedUnits: 2, bytes: 65000 }];
    const items = normalizeItems([
      { type: "citation", seq: 10, by: "person", sources },
      { type: "user", seq: 11, text: "Cited an earlier chat as background: “Parser” (events 7, 9)." },
      { type: "user", seq: 12, text: "and now?" },
      { type: "citation", seq: 13, by: "assistant", sources },
      { type: "user", seq: 14, text: "thanks" },
    ]);
    expect(items.map((i) => i.type)).toEqual(["citation", "user", "citation", "user"]);
    const [person, , model] = items as Extract<ChatItem, { type: "citation" }>[];
    expect(person.message).toContain("Parser");
    expect(person.sources).toEqual([{ chat: 4, title: "Parser", project: "/p.ssproj", cited: [7, 9], units: 3, omittedUnits: 2 }]);
    expect(model.by).toBe("assistant");
    expect(model.message).toBeNull();
    expect(chatMarkdown("t", items, { you: "You", assistant: "A", cited: "Cited" })).toContain("> Cited: “Parser” (7, 9)");
  });

  it("keeps a malformed sources list readable rather than failing the chat", () => {
    expect(normalizeSources(null)).toEqual([]);
    expect(normalizeSources([null, 3, { chat: "x", cited: [1, "2", null], title: 5 }])).toEqual([
      { chat: -1, title: "5", project: null, cited: [1], units: 0, omittedUnits: 0 },
    ]);
  });
});
