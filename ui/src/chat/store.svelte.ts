/** The chat panel's state: the chats, the open chat's rows, live events applied onto them,
 *  the assistant's settings. Talks to the backend only through a `ChatBackend` (the
 *  transport's `chat` and `onChat`), so tests drive it with a fake.
 *
 *  `history` is the truth; events are a live view of it. Events are applied as they come
 *  (text streams into the last assistant row, tool cards are created and updated by call id,
 *  approval prompts mark their card), and when a turn ends the chat is re-read. Events of
 *  other chats only update the list's running marks. */
import type { ChatEvent, ChatRequest, Unsubscribe } from "../lib/transport/types";
import type { Category, Cited, Degraded, Fact, Health, HistoryReply, HitRef, Question, Written } from "../lib/wire/types.gen";
import { errorText } from "../screens/util";
import { failed } from "../lib/i18n/index.svelte";
import {
  NOTICE_OF_END,
  addUsage,
  normalizeDecision,
  normalizeItems,
  normalizeTier,
  normalizeUsage,
  providerGap,
  settingsRequest,
  titleFrom,
  type ChatItem,
  type ChatSettings,
  type ChatSummary,
  type EditableSettings,
  type ModelInfo,
  type Provider,
  type ToolCardItem,
  type TurnEnd,
  type Usage,
} from "./protocol";

export interface ChatBackend {
  chat<T = unknown>(request: ChatRequest): Promise<T>;
  onChat(handler: (e: ChatEvent) => void): Unsubscribe;
  /** A registry command (`approved`: the person just confirmed it). */
  call?<T = unknown>(command: string, params?: unknown, approved?: boolean): Promise<T>;
}


/** Finished turns whose extras are kept, over all chats; beyond it the oldest go. They are
 *  kept for the page's lifetime, one per finished turn, so a page left open for weeks would
 *  otherwise grow without end. Losing an old turn's extras only loses what this page counted
 *  itself: the log's own usage rows and end notices, where it has them, still show. */
export const MAX_TURN_EXTRAS = 200;

/** What this UI adds to a turn: its token usage and how it ended (when not plainly). */
interface TurnExtras {
  usage: Usage | null;
  end: { end: TurnEnd; detail: string | null } | null;
}

const str = (x: unknown) => (typeof x === "string" ? x : x == null ? "" : String(x));
const num = (x: unknown) => (typeof x === "number" && Number.isFinite(x) ? x : 0);

function findLast<T, S extends T>(list: readonly T[], pred: (x: T) => x is S): S | undefined {
  for (let i = list.length - 1; i >= 0; i--) if (pred(list[i])) return list[i] as S;
  return undefined;
}

export class ChatStore {
  /** Newest first, as `list` returns them. */
  chats: ChatSummary[] = $state([]);
  /** The open chat's id; null before one is chosen or created. */
  current: number | null = $state(null);
  items: ChatItem[] = $state([]);
  /** A turn of the open chat is running. */
  running = $state(false);
  /** The open chat's history is being read. */
  loading = $state(false);
  /** The last failed request, the backend's message verbatim; "" when none. */
  error = $state("");
  settings: ChatSettings | null = $state(null);
  models: ModelInfo[] = $state([]);
  /** The open chat's context may be degrading (the probe's banner); null when healthy. */
  degraded: Degraded | null = $state(null);
  /** Token usage of the open chat's running turn so far, summed over its replies. */
  turnUsage: Usage | null = $state(null);
  /** Seconds the server has been silent while a turn waits for it (`null`: not waiting). */
  waiting: number | null = $state(null);
  /** The event a search hit opened the chat at: the conversation scrolls to it and marks
   *  it. Null when the chat was opened plainly. */
  focus: { chat: number; seq: number } | null = $state(null);

  private localId = 1;
  private listAsked = 0;
  private listApplied = 0;
  /** Counts `select`s, so a list asked before a chat was opened does not close it. */
  private opened = 0;
  /** Chats whose title stands in until their first message. */
  private placeholders = new Set<number>();
  /** A `create` on its way. */
  private creating: Promise<number | null> | null = null;
  private loadToken = 0;
  /** Events of the open chat that arrived while its history was being read. */
  private buffer: ChatEvent[] | null = null;
  /** Where the last history snapshot's streamed text ended (UTF-16 units, from the turn's
   *  start): deltas before it are already shown. Null outside such a turn. */
  private streamedEnd: number | null = null;
  /** Per chat: the extras of each finished turn, by the seq of the turn's user message. */
  private extras = new Map<number, Map<number, TurnExtras>>();
  /** The open chat's running turn's extras. */
  private turn: TurnExtras | null = null;
  /** A finished turn's extras, waiting for the history that names its user message. */
  private finished: { chat: number; extras: TurnExtras } | null = null;

  constructor(readonly backend: ChatBackend) {}

  /** Listens to every chat's events and reads the list. */
  start(): Unsubscribe {
    const off = this.backend.onChat((e) => this.apply(e));
    void this.refreshList();
    return off;
  }

  private async request<T>(req: ChatRequest): Promise<T | undefined> {
    try {
      return await this.backend.chat<T>(req);
    } catch (e) {
      this.error = failed(`chat.${req.op}`, errorText(e));
      return undefined;
    }
  }

  clearError() {
    this.error = "";
  }

  get anyRunning(): boolean {
    return this.running || this.chats.some((c) => c.running);
  }

  /** The open chat's last turn did not finish (failed, stopped, hit the call cap, or its
   *  message is unanswered): the person may run it again without retyping. The service
   *  decides for good; this only offers the button. */
  get canRetry(): boolean {
    if (this.running || this.current === null || providerGap(this.settings)) return false;
    for (let k = this.items.length - 1; k >= 0; k--) {
      const item = this.items[k];
      switch (item.type) {
        case "usage":
          continue;
        case "turnEnd":
          return item.end !== "finished";
        case "notice":
          if (["turn_failed", "turn_cancelled", "tool_call_limit"].includes(item.kind)) return true;
          continue;
        case "user":
          return true;
        case "toolCard":
          return item.status !== "pending";
        default:
          return false;
      }
    }
    return false;
  }

  /** Runs the last message again (see `canRetry`). */
  async retry(): Promise<boolean> {
    const chat = this.current;
    if (chat === null || this.running || providerGap(this.settings)) return false;
    this.setRunning(chat, true);
    this.turn = { usage: null, end: null };
    this.turnUsage = null;
    this.error = "";
    this.streamedEnd = null;
    const ok = (await this.request({ op: "retry", chat })) !== undefined;
    if (!ok && this.current === chat) {
      this.setRunning(chat, false);
      this.turn = null;
    }
    return ok;
  }

  // --- chats ---------------------------------------------------------------------------

  async refreshList(): Promise<void> {
    const n = ++this.listAsked;
    const opened = this.opened;
    const list = await this.request<ChatSummary[]>({ op: "list" });
    // An older list answered late (replies may overtake each other) says nothing new.
    if (!Array.isArray(list) || n < this.listApplied) return;
    this.listApplied = n;
    this.chats = list.map((c) => ({ ...c, title: str(c.title), running: !!c.running || (c.id === this.current && this.running) }));
    // Asked after this chat was opened and not in it: deleted elsewhere.
    if (this.current !== null && opened === this.opened && !this.chats.some((c) => c.id === this.current)) {
      this.current = null;
      this.items = [];
      this.running = false;
    }
  }

  /** Opens a chat (null: none) and reads its history. */
  async select(id: number | null): Promise<void> {
    if (id === this.current && id !== null) return this.loadHistory();
    this.opened++;
    this.current = id;
    if (this.focus?.chat !== id) this.focus = null;
    this.items = [];
    this.degraded = null;
    this.turn = null;
    this.turnUsage = null;
    this.running = id !== null && !!this.chats.find((c) => c.id === id)?.running;
    if (id !== null) await this.loadHistory();
  }

  /** Creates a chat and opens it; its id, or null when refused. A message sent meanwhile
   *  waits for it and goes to the new chat. `placeholder`: the title only stands in until
   *  the first message, which then names the chat. */
  create(title?: string, placeholder = false): Promise<number | null> {
    const run = async () => {
      const req: ChatRequest = { op: "create" };
      if (title?.trim()) req.title = title.trim();
      const made = await this.request<{ id: number }>(req);
      if (!made || typeof made.id !== "number") return null;
      if (placeholder) this.placeholders.add(made.id);
      const opened = this.select(made.id);
      await Promise.all([opened, this.refreshList()]);
      return made.id;
    };
    const p = run().finally(() => {
      if (this.creating === p) this.creating = null;
    });
    this.creating = p;
    return p;
  }

  /** Opens a chat at one of its events (a search hit). */
  async openAt(chat: number, seq: number): Promise<void> {
    this.focus = { chat, seq };
    await this.select(chat);
  }

  /** Brings hits of other chats into the open chat as a frozen citation (the backend reads
   *  each source once and appends the citation and its readable message). */
  async cite(hits: HitRef[]): Promise<Cited | null> {
    const chat = this.current;
    if (chat === null || this.running || !hits.length) return null;
    const cited = await this.request<Cited>({ op: "cite", chat, hits: hits.map((h) => ({ chat: h.chat, seq: h.seq })) });
    if (!cited) return null;
    this.focus = null;
    if (this.current === chat) await this.loadHistory();
    void this.refreshList();
    return cited;
  }

  /** The open project's file, which scopes "this project's chats"; null when it has none
   *  (never saved) or it cannot be asked. */
  async openProject(): Promise<string | null> {
    if (!this.backend.call) return null;
    try {
      const r = await this.backend.call<{ path?: unknown }>("project.file", {});
      return typeof r?.path === "string" ? r.path : null;
    } catch {
      return null;
    }
  }

  /** Restores the project to a checkpoint, after the person confirmed it (the command is
   *  alwaysConfirm: it runs only as approved). */
  async restore(checkpoint: number): Promise<boolean> {
    if (!this.backend.call) return false;
    try {
      await this.backend.call("assistant.restore", { id: checkpoint }, true);
      return true;
    } catch (e) {
      this.error = failed("chat.restore", errorText(e));
      return false;
    }
  }

  /** Starts a chat from `from` (seeded with its digest while handoff seeding is on) and
   *  opens it; its id, or null when refused. */
  async fromHandoff(from: number, title?: string): Promise<number | null> {
    const req: ChatRequest = { op: "newChatFromHandoff", chat: from };
    if (title?.trim()) req.title = title.trim();
    const made = await this.request<{ id: number }>(req);
    if (!made || typeof made.id !== "number") return null;
    await Promise.all([this.select(made.id), this.refreshList()]);
    return made.id;
  }

  async rename(id: number, title: string): Promise<boolean> {
    const t = title.trim();
    if (!t) return false;
    const ok = (await this.request({ op: "rename", chat: id, title: t })) !== undefined;
    if (ok) {
      const entry = this.chats.find((c) => c.id === id);
      if (entry) entry.title = t;
    }
    return ok;
  }

  /** Deletes a chat (the backend refuses while a turn runs). */
  async remove(id: number): Promise<boolean> {
    const ok = (await this.request({ op: "delete", chat: id })) !== undefined;
    if (!ok) return false;
    this.extras.delete(id);
    this.chats = this.chats.filter((c) => c.id !== id);
    if (this.current === id) await this.select(null);
    await this.refreshList();
    return true;
  }

  /** Re-reads the open chat. Events arriving meanwhile are applied on top of the answer. */
  async loadHistory(): Promise<void> {
    const chat = this.current;
    if (chat === null) return;
    const token = ++this.loadToken;
    const mark = this.localId;
    this.buffer = [];
    this.loading = true;
    let reply: HistoryReply | undefined;
    try {
      reply = await this.request<HistoryReply>({ op: "history", chat });
    } finally {
      if (token === this.loadToken) {
        const buffered = this.buffer ?? [];
        this.buffer = null;
        this.loading = false;
        if (reply && this.current === chat) {
          // A message sent while the history was on its way is not in it yet.
          const sent = this.items.filter((i) => i.type === "user" && i.seq === null && Number(i.key.slice(1)) >= mark);
          this.setHistory(chat, reply, sent);
        }
        for (const e of buffered) this.applyCurrent(e);
      }
    }
  }

  private setHistory(chat: number, reply: HistoryReply, sent: ChatItem[]) {
    const items = normalizeItems(reply.items);
    let byUser = this.extras.get(chat);
    if (this.finished?.chat === chat) {
      const lastUser = findLast(items, (i): i is Extract<ChatItem, { type: "user" }> => i.type === "user");
      if (lastUser?.seq != null) byUser = keepExtras(this.extras, chat, lastUser.seq, this.finished.extras);
      this.finished = null;
    }
    // A running turn's usage so far is shown live, not as a finished turn's row.
    if (reply.running && items.at(-1)?.type === "usage") items.pop();
    this.items = [...(byUser ? withExtras(items, byUser, () => this.localKey()) : items), ...sent];
    this.running = !!reply.running || sent.length > 0;
    this.degraded = reply.degraded ?? null;
    if (!this.running) {
      this.turn = null;
      this.turnUsage = null;
    }
    for (const a of reply.approvals ?? []) this.markApproval(a);
    // Mid-reply: the text streamed so far is not in the log yet; show it, and skip the
    // deltas it already holds when they arrive.
    const live = this.running ? reply.streaming : null;
    this.streamedEnd = live ? num(live.end) : null;
    if (live?.text) this.items.push({ type: "assistant", key: this.localKey(), seq: null, text: str(live.text), streaming: true });
    const entry = this.chats.find((c) => c.id === chat);
    if (entry) entry.running = this.running;
  }

  // --- turns ---------------------------------------------------------------------------

  /** Sends a message to the open chat (creating one when none is open). */
  async send(text: string): Promise<boolean> {
    const body = text.trim();
    // A provider not set up (no key for a hosted one, no URL, no model) can only fail:
    // the panel says what is missing instead (`providerGap`).
    if (!body || this.running || providerGap(this.settings)) return false;
    if (this.creating) await this.creating;
    const chat = this.current ?? (await this.create(titleFrom(body)));
    if (chat === null) return false;
    const key = this.localKey();
    this.items.push({ type: "user", key, seq: null, text: body });
    this.setRunning(chat, true);
    this.turn = { usage: null, end: null };
    this.turnUsage = null;
    this.error = "";
    // A new turn counts its text from 0.
    this.streamedEnd = null;
    const ok = (await this.request({ op: "send", chat, text: body })) !== undefined;
    if (ok && this.placeholders.delete(chat)) void this.rename(chat, titleFrom(body));
    if (!ok && this.current === chat) {
      // Never started: no turnEnded will come.
      this.items = this.items.filter((i) => i.key !== key);
      this.setRunning(chat, false);
      this.turn = null;
    }
    return ok;
  }

  async cancel(): Promise<void> {
    if (this.current !== null) await this.request({ op: "cancel", chat: this.current });
  }

  // Prompts are per chat (two chats may share a call id): answers name the open chat.
  async approve(callId: string): Promise<void> {
    if (this.current === null) return;
    await this.answer(callId, { op: "approve", chat: this.current, callId });
  }

  async deny(callId: string, reason?: string): Promise<void> {
    if (this.current === null) return;
    await this.answer(callId, { op: "deny", chat: this.current, callId, ...(reason?.trim() ? { reason: reason.trim() } : {}) });
  }

  /** Approves this turn's project edits (Confirm tier), now and for the rest of the turn. */
  async approveAll(): Promise<void> {
    if (this.current === null) return;
    const waiting = this.cards().filter((c) => c.approval?.tier === "confirm");
    for (const c of waiting) c.approval!.answering = true;
    const ok = (await this.request({ op: "approveAll", chat: this.current })) !== undefined;
    if (!ok) for (const c of waiting) if (c.approval) c.approval.answering = false;
  }

  private async answer(callId: string, req: ChatRequest) {
    const card = this.card(callId);
    if (card?.approval) card.approval.answering = true;
    const ok = (await this.request(req)) !== undefined;
    // The prompt closes with approvalResolved; on a refusal, let the person try again.
    const now = this.card(callId);
    if (!ok && now?.approval) now.approval.answering = false;
  }

  // --- settings --------------------------------------------------------------------------

  async loadSettings(): Promise<ChatSettings | null> {
    const s = await this.request<ChatSettings>({ op: "getSettings" });
    if (s) this.settings = s;
    return s ?? null;
  }

  // --- memory (the person's own writes; the model only ever proposes) -------------------

  /** Facts, newest first (of one category), or null when they could not be read. */
  async memoryList(category?: Category): Promise<Fact[] | null> {
    const r = await this.request<{ facts: Fact[] }>({ op: "memoryList", ...(category ? { category } : {}) });
    return r?.facts ?? null;
  }

  async memorySearch(query: string): Promise<Fact[] | null> {
    const r = await this.request<{ facts: Fact[] }>({ op: "memorySearch", query });
    return r?.facts ?? null;
  }

  /** Keeps a fact the person said yes to; what was kept (redacted), or null with the error
   *  shown. `about` names the proposal it answers (recorded in the current chat). */
  async memoryAdd(category: Category, text: string, about?: string): Promise<Written | null> {
    const answering = about && this.current !== null ? { chat: this.current, about } : {};
    return (await this.request<Written>({ op: "memoryAdd", category, text, ...answering })) ?? null;
  }

  /** The person dismissed a proposal: recorded, so it stays dismissed. */
  async memoryDismiss(about: string): Promise<boolean> {
    if (this.current === null) return false;
    return (await this.request<null>({ op: "memoryDismiss", chat: this.current, about })) !== undefined;
  }

  async memoryEdit(fact: number, text: string): Promise<Written | null> {
    return (await this.request<Written>({ op: "memoryEdit", fact, text })) ?? null;
  }

  async memoryDelete(fact: number): Promise<boolean> {
    return (await this.request<{ deleted: boolean }>({ op: "memoryDelete", fact }))?.deleted === true;
  }

  /** Deletes every fact; only after the person confirmed. */
  async memoryClear(): Promise<number | null> {
    return (await this.request<{ deleted: number }>({ op: "memoryClear", confirmed: true }))?.deleted ?? null;
  }

  /** The retrieval health snapshot (numbers and closed enums only), or null. */
  async loadHealth(): Promise<Health | null> {
    return (await this.request<Health>({ op: "health" })) ?? null;
  }

  /** Saves the form; `apiKey`: a typed key to store, null to forget it, undefined to keep it. */
  async saveSettings(form: EditableSettings, apiKey?: string | null): Promise<boolean> {
    const s = await this.request<ChatSettings>(settingsRequest(form, apiKey));
    if (s) this.settings = s;
    return !!s;
  }

  /** Tells the assistant the UI's language (its own text in a request follows it). */
  async setLanguage(language: "en" | "zh"): Promise<boolean> {
    const s = await this.request<ChatSettings>({ op: "setSettings", language });
    if (s) this.settings = s;
    return !!s;
  }

  /** Forgets the stored API key. */
  async clearApiKey(): Promise<boolean> {
    const s = await this.request<ChatSettings>({ op: "setSettings", apiKey: null });
    if (s) this.settings = s;
    return !!s;
  }

  /** Lists the provider's models. `connection`: provider fields to store first, so the list
   *  comes from what the form shows rather than what was saved before. */
  async loadModels(connection?: { provider: Provider; baseUrl: string; apiKey?: string }): Promise<boolean> {
    if (connection) {
      const req: ChatRequest = { op: "setSettings", provider: connection.provider, baseUrl: connection.baseUrl.trim() };
      if (connection.apiKey?.trim()) req.apiKey = connection.apiKey.trim();
      const s = await this.request<ChatSettings>(req);
      if (!s) return false;
      this.settings = s;
    }
    const models = await this.request<ModelInfo[]>({ op: "listModels" });
    if (!Array.isArray(models)) return false;
    this.models = models.map((m) => ({ id: str(m.id), displayName: str(m.displayName) || str(m.id) }));
    return true;
  }

  // --- events ----------------------------------------------------------------------------

  /** Applies one live event (any chat's). */
  apply(e: ChatEvent) {
    if (!e || typeof e.chat !== "number") return;
    if (e.type === "resync") {
      // The connection dropped and came back: anything may have happened meanwhile.
      void this.refreshList();
      if (this.current !== null) void this.loadHistory();
      return;
    }
    const ended = e.type === "turnEnded";
    const entry = this.chats.find((c) => c.id === e.chat);
    if (entry) entry.running = !ended;
    if (ended) void this.refreshList();
    if (e.chat !== this.current) return;
    if (this.buffer) this.buffer.push(e);
    else this.applyCurrent(e);
  }

  private applyCurrent(e: ChatEvent) {
    const chat = e.chat;
    if (e.type !== "turnEnded") {
      this.running = true;
      this.turn ??= { usage: null, end: null };
    }
    // Any word from the turn ends a wait; only `waiting` starts one.
    this.waiting = e.type === "waiting" ? num(e.seconds) : null;
    switch (e.type) {
      case "textDelta": {
        let text = str(e.text);
        if (this.streamedEnd !== null && typeof e.at === "number") {
          const have = this.streamedEnd - e.at;
          if (have >= text.length) break;
          if (have > 0) text = text.slice(have);
        }
        const last = this.items.at(-1);
        if (last?.type === "assistant" && last.streaming) last.text += text;
        else this.items.push({ type: "assistant", key: this.localKey(), seq: null, text, streaming: true });
        break;
      }
      case "toolCallStarted":
        this.ensureCard(str(e.id), str(e.name));
        break;
      case "toolCallPending": {
        const card = this.ensureCard(str(e.id), str(e.name));
        card.args = e.args;
        break;
      }
      case "toolCallRunning": {
        const card = this.ensureCard(str(e.id));
        if (card.status === "pending") card.status = "running";
        break;
      }
      case "toolCallDone": {
        const card = this.ensureCard(str(e.id));
        const s = str(e.status);
        card.status = s === "ok" || s === "error" || s === "denied" || s === "blocked" ? s : "error";
        card.result = str(e.content);
        card.approval = null;
        break;
      }
      case "approvalRequested":
        this.markApproval(e);
        break;
      case "approvalResolved": {
        const card = this.card(str(e.callId));
        if (card) {
          card.approval = null;
          card.decision = normalizeDecision(e);
          if (card.status === "awaiting") card.status = "running";
        }
        break;
      }
      case "usage":
        this.turn!.usage = addUsage(this.turn!.usage, normalizeUsage(e));
        this.turnUsage = this.turn!.usage;
        break;
      case "turnEnded": {
        this.running = false;
        this.streamedEnd = null;
        this.endStreaming();
        const end = str(e.end) as TurnEnd;
        const extras: TurnExtras = this.turn ?? { usage: null, end: null };
        if (end === "failed" || end === "toolCallLimit") extras.end = { end, detail: e.detail == null ? null : str(e.detail) };
        // Shown now; kept with the turn when the history comes back.
        if (extras.end) this.items.push({ type: "turnEnd", key: this.localKey(), ...extras.end });
        if (extras.usage) this.items.push({ type: "usage", key: this.localKey(), usage: extras.usage });
        for (const c of this.cards()) if (c.approval) c.approval = null;
        this.turn = null;
        this.turnUsage = null;
        if (extras.usage || extras.end) this.finished = { chat, extras };
        void this.loadHistory();
        break;
      }
    }
  }

  private markApproval(e: Record<string, unknown>) {
    const card = this.ensureCard(str(e.callId), str(e.name));
    // The prompt names the call as it will run – for a meta_executeCommand call, the inner
    // command and its own arguments – which is what the person approves.
    if (e.name) card.name = str(e.name);
    if (e.args !== undefined) card.args = e.args;
    card.approval = {
      tier: normalizeTier(e.tier),
      answering: false,
      ...(e.question && typeof e.question === "object" ? { question: e.question as Question } : {}),
    };
    card.status = "awaiting";
  }

  private setRunning(chat: number, running: boolean) {
    if (chat === this.current) this.running = running;
    const entry = this.chats.find((c) => c.id === chat);
    if (entry) entry.running = running;
  }

  private cards(): ToolCardItem[] {
    return this.items.filter((i): i is ToolCardItem => i.type === "toolCard");
  }

  /** The latest card of a call. */
  card(id: string): ToolCardItem | undefined {
    return findLast(this.cards(), (c): c is ToolCardItem => c.id === id);
  }

  private ensureCard(id: string, name = ""): ToolCardItem {
    const found = this.card(id);
    if (found) {
      if (name && !found.name) found.name = name;
      return found;
    }
    this.endStreaming();
    this.items.push({ type: "toolCard", key: `c${id}`, seq: null, id, name, args: undefined, status: "pending", result: null, approval: null, decision: null, checkpoint: null });
    return this.items.at(-1) as ToolCardItem;
  }

  /** The streaming assistant row is complete (a call or the end came after it). */
  private endStreaming() {
    const last = this.items.at(-1);
    if (last?.type === "assistant") last.streaming = false;
  }

  private localKey() {
    return `l${this.localId++}`;
  }
}

/** Keeps `extras` for the turn of user message `seq` in `chat`, then drops the oldest beyond
 *  `max` over all chats: the chat just added to counts as newest, and the first to lose its
 *  oldest turns is the one added to longest ago. Returns the chat's map. */
export function keepExtras<T>(all: Map<number, Map<number, T>>, chat: number, seq: number, extras: T, max = MAX_TURN_EXTRAS): Map<number, T> {
  const byUser = all.get(chat) ?? new Map<number, T>();
  all.delete(chat);
  all.set(chat, byUser);
  byUser.delete(seq);
  byUser.set(seq, extras);
  let total = 0;
  for (const m of all.values()) total += m.size;
  for (const [c, m] of all) {
    for (const s of m.keys()) {
      if (total <= max) return byUser;
      m.delete(s);
      total--;
    }
    all.delete(c);
  }
  return byUser;
}

/** The history's rows with each turn's extras after the turn's last row. A turn's end is
 *  left out when the history already has the notice that says it. */
export function withExtras(items: ChatItem[], byUser: Map<number, TurnExtras>, key: () => string): ChatItem[] {
  const out: ChatItem[] = [];
  let turnUser: number | null = null;
  let turnNotices = new Set<string>();
  let turnHasUsage = false;
  const close = () => {
    const x = turnUser === null ? undefined : byUser.get(turnUser);
    if (!x) return;
    if (x.end && !turnNotices.has(NOTICE_OF_END[x.end.end] ?? "")) out.push({ type: "turnEnd", key: key(), ...x.end });
    // The log's record of the turn's usage wins over what this page counted.
    if (x.usage && !turnHasUsage) out.push({ type: "usage", key: key(), usage: x.usage });
  };
  for (const item of items) {
    if (item.type === "user") {
      close();
      turnUser = item.seq;
      turnNotices = new Set();
      turnHasUsage = false;
    } else if (item.type === "notice") turnNotices.add(item.kind);
    else if (item.type === "usage") turnHasUsage = true;
    out.push(item);
  }
  close();
  return out;
}
