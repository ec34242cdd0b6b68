/** The assistant's chats as the UI sees them: the shapes of docs/ui-protocol.md ("The
 *  assistant's chats") and pure helpers over them. No Svelte, no backend: tests pin these. */
import type {
  ChatListEntry,
  Decider,
  Degraded,
  Mechanisms,
  ModelEntry,
  ProviderKind,
  Question,
  ServiceEvent,
  SettingsView,
  ToolStatus,
  TurnEndKind,
  Tier as WireTier,
} from "../lib/wire/types.gen";
import type { Key } from "../lib/i18n/index.svelte";
import { mechanismsOf } from "./mechanisms";

/** The chat door's shapes are generated from the Rust types (`lib/wire/types.gen.ts`);
 *  what follows names them for the panel. */
export type Provider = ProviderKind;
export const PROVIDERS: Provider[] = ["anthropic", "openai-compatible"];
/** Well-known Chat Completions endpoints, offered as suggestions for the base URL (the
 *  field stays free text: any OpenAI-compatible server works). */
export const OPENAI_COMPATIBLE_ENDPOINTS: { name: string; url: string }[] = [
  { name: "OpenAI", url: "https://api.openai.com/v1" },
  { name: "Google Gemini", url: "https://generativelanguage.googleapis.com/v1beta/openai" },
  { name: "DeepSeek", url: "https://api.deepseek.com/v1" },
  { name: "OpenRouter", url: "https://openrouter.ai/api/v1" },
  { name: "Groq", url: "https://api.groq.com/openai/v1" },
  { name: "Mistral", url: "https://api.mistral.ai/v1" },
  { name: "Ollama (this computer)", url: "http://localhost:11434/v1" },
  { name: "LM Studio (this computer)", url: "http://localhost:1234/v1" },
  { name: "llama.cpp server / vLLM (this computer)", url: "http://localhost:8080/v1" },
];

export const DEFAULT_BASE_URL: Record<Provider, string> = {
  anthropic: "https://api.anthropic.com",
  "openai-compatible": "https://api.openai.com/v1",
};

/** One chat in the list (`list`). */
export type ChatSummary = ChatListEntry;

/** The assistant's settings (`getSettings` / `setSettings`); the key itself never comes back. */
export type ChatSettings = SettingsView;

/** The settings fields a person edits: the connection, the approvals, and every mechanism
 *  (the `Mechanisms` type generated from Rust, so none can be missing). */
export type EditableSettings = Pick<ChatSettings, "provider" | "baseUrl" | "model" | "autoApproveEdits" | "allowDeviceControl" | "constrainedCalls"> &
  Mechanisms & { [K in LimitField]?: number | null };

/** The model limits a person may set (null: what the server says, else Sextant's table). */
export const LIMIT_FIELDS = ["contextWindow", "maxOutputTokens", "maxToolCalls"] as const;
export type LimitField = (typeof LIMIT_FIELDS)[number];

/** A limit typed in a form: a whole number, or null for "automatic" (empty or not a number). */
export function limitValue(v: unknown): number | null {
  const n = typeof v === "number" ? v : typeof v === "string" && v.trim() ? Number(v.trim()) : NaN;
  return Number.isInteger(n) && n > 0 ? n : null;
}

export type ModelInfo = ModelEntry;

/** Token counts: the chat door's `usage` event (generated from the assistant's
 *  `ServiceEvent`), without its envelope. `estimated` (the output count is an estimate: the
 *  turn was stopped before the provider counted) is kept only when true, so it is optional. */
type UsageEvent = Extract<ServiceEvent, { type: "usage" }>;
export type Usage = Omit<UsageEvent, "chat" | "type" | "estimated"> & Partial<Pick<UsageEvent, "estimated">>;

/** How much care a command needs (`sextant_commands::Tier`, generated), as the card shows
 *  it; `unknown` for a spelling no version of the backend sends. */
export type Tier = WireTier | "unknown";

/** A tool card's state: the history's statuses, plus the live ones (`running`, `awaiting`
 *  an answer, `blocked` by post-execute). */
export type CardStatus = ToolStatus | "running" | "awaiting";
export const CARD_STATUSES: CardStatus[] = ["pending", "running", "awaiting", "ok", "error", "denied", "blocked", "interrupted"];

/** What ended a turn (`turnEnded.end`). */
export type TurnEnd = TurnEndKind;

export interface Approval {
  tier: Tier;
  /** What this very call does that needs a yes beyond its tier (runs a program, writes
   *  outside the user's folders, sends to a device), as data worded in the person's
   *  language (`lib/i18n/consent.ts`). */
  question?: Question;
  /** An answer is on its way; the buttons wait. */
  answering: boolean;
}

/** Who answered an approval prompt, and how (docs/ui-protocol.md: `by`). */
export interface Decision {
  approved: boolean;
  by: Decider;
  reason: string | null;
}

export function normalizeDecision(x: Record<string, unknown>): Decision {
  const by = str(x.by);
  const known: Decider[] = ["person", "approveAll", "timeout", "cancelled", "turnEnded"];
  return {
    approved: x.approved === true,
    by: (known as string[]).includes(by) ? (by as Decider) : "person",
    reason: x.reason == null || x.reason === "" ? null : str(x.reason),
  };
}

/** One row of the chat. `user`…`notice` come from `history` (and live events); `usage` and
 *  `turnEnd` are this UI's own, from the `usage` and `turnEnded` events. `key` is stable
 *  for Svelte's keyed lists; `seq` is the log position (null while only live). */
export type ChatItem =
  | { type: "user"; key: string; seq: number | null; text: string; skill?: { id: string; title: string } }
  | { type: "assistant"; key: string; seq: number | null; text: string; streaming: boolean }
  | {
      type: "toolCard";
      key: string;
      seq: number | null;
      id: string;
      name: string;
      /** Undefined while the model is still writing them. */
      args: unknown;
      status: CardStatus;
      result: string | null;
      approval: Approval | null;
      /** How the prompt was answered, once it was (from the log's `approval` record). */
      decision: Decision | null;
      /** The checkpoint taken before this edit (from the log's `checkpoint_created`). */
      checkpoint: number | null;
    }
  | { type: "compaction"; key: string; seq: number; through: number; summary: string }
  | {
      type: "citation";
      key: string;
      seq: number;
      by: "person" | "assistant";
      sources: CitedSource[];
      /** The readable message the person's citation appended after it (what the model
       *  reads as theirs); shown on the card, not as a second row. */
      message: string | null;
    }
  | { type: "notice"; key: string; seq: number; kind: string; payload: unknown }
  | { type: "usage"; key: string; usage: Usage }
  | { type: "turnEnd"; key: string; end: TurnEnd; detail: string | null };

export type ToolCardItem = Extract<ChatItem, { type: "toolCard" }>;

/** One source chat of a citation, as its `sources` entry records it. */
export interface CitedSource {
  chat: number;
  title: string;
  project: string | null;
  /** The cited event seqs, ascending. */
  cited: number[];
  /** Units of the source the snapshot kept, and how many were left out to fit. */
  units: number;
  omittedUnits: number;
}

export function normalizeSources(raw: unknown): CitedSource[] {
  return (Array.isArray(raw) ? raw : [])
    .filter((s): s is Record<string, unknown> => !!s && typeof s === "object")
    .map((s) => ({
      chat: num(s.chat, -1),
      title: str(s.title),
      project: typeof s.project === "string" ? s.project : null,
      cited: (Array.isArray(s.cited) ? s.cited : []).filter((n): n is number => typeof n === "number" && Number.isFinite(n)),
      units: num(s.units),
      omittedUnits: num(s.omittedUnits),
    }));
}

const num = (x: unknown, d = 0) => (typeof x === "number" && Number.isFinite(x) ? x : d);
const str = (x: unknown) => (typeof x === "string" ? x : x == null ? "" : String(x));

/** A tier as the backend spells it (`"deviceGated"`; an older one `"DeviceGated"`, and old
 *  chat logs keep those), or `unknown`. */
export function normalizeTier(x: unknown): Tier {
  const k = str(x).replace(/[_\s-]/g, "").toLowerCase();
  const tiers: Record<string, WireTier> = {
    safe: "safe",
    confirm: "confirm",
    devicegated: "deviceGated",
    alwaysconfirm: "alwaysConfirm",
    blocked: "blocked",
  };
  return tiers[k] ?? "unknown";
}

/** Device control and destructive calls: highlighted, and never covered by "approve all". */
export const isHighRisk = (tier: Tier) => tier === "deviceGated" || tier === "alwaysConfirm";

/** "Approve all" answers the turn's project edits (Confirm tier) only. */
export const approveAllCovers = (tier: Tier) => tier === "confirm";

function cardStatus(x: unknown): CardStatus {
  const s = str(x);
  return (CARD_STATUSES as string[]).includes(s) ? (s as CardStatus) : "error";
}

/** `history`'s items as rows. Unknown types become notices, so nothing is dropped. */
export function normalizeItems(raw: unknown): ChatItem[] {
  const out: ChatItem[] = [];
  const cardKeys = new Set<string>();
  // Each reply's token use is on record; a turn shows their sum after its last row.
  let turnUsage: Usage | null = null;
  let usageKey = "";
  const closeTurn = () => {
    if (turnUsage) out.push({ type: "usage", key: usageKey, usage: turnUsage });
    turnUsage = null;
  };
  for (const [index, r] of (Array.isArray(raw) ? raw : []).entries()) {
    if (!r || typeof r !== "object") continue;
    const it = r as Record<string, unknown>;
    const seq = num(it.seq, -1 - index);
    const key = `s${seq}`;
    // `toolCard`; an older backend wrote `tool_card`.
    const type = str(it.type).replace(/_(\w)/g, (_, c: string) => c.toUpperCase());
    switch (type) {
      case "user": {
        closeTurn();
        // A person's citation appends its readable message right after it: one card.
        const last = out.at(-1);
        if (last?.type === "citation" && last.by === "person" && last.message === null && last.seq === seq - 1) {
          last.message = str(it.text);
          break;
        }
        out.push({ type: "user", key, seq, text: str(it.text) });
        break;
      }
      case "assistant":
        out.push({ type: "assistant", key, seq, text: str(it.text), streaming: false });
        break;
      case "toolCard": {
        const id = str(it.id);
        // Keyed by call id so a card keeps its place (and open details) from live to history.
        const cardKey = cardKeys.has(id) ? key : `c${id}`;
        cardKeys.add(id);
        out.push({
          type: "toolCard",
          key: cardKey,
          seq,
          id,
          name: str(it.name),
          args: it.args,
          status: cardStatus(it.status),
          result: it.result == null ? null : str(it.result),
          approval: null,
          decision: null,
          checkpoint: null,
        });
        break;
      }
      case "compaction":
        out.push({ type: "compaction", key, seq, through: num(it.through), summary: str(it.summary) });
        break;
      case "citation":
        out.push({ type: "citation", key, seq, by: it.by === "assistant" ? "assistant" : "person", sources: normalizeSources(it.sources), message: null });
        break;
      case "notice": {
        // An approval record belongs on its call's card, not in the conversation.
        const p = it.payload as Record<string, unknown> | null;
        if (it.kind === "usage" && p && typeof p === "object") {
          turnUsage = addUsage(turnUsage, normalizeUsage(p));
          usageKey = `u${seq}`;
          break;
        }
        // The probe's verdicts are read by the banner (`degraded`), never shown as rows.
        if (it.kind === "probe_verdict") break;
        // A skill the app loaded for the model: a chip on the message that asked, not the
        // synthetic call's card.
        if (it.kind === "skill_loaded" && p && typeof p === "object") {
          const at = out.findIndex((c) => c.type === "toolCard" && c.id === str(p.callId));
          if (at >= 0) out.splice(at, 1);
          const asked = findLastUser(out);
          if (asked) asked.skill = { id: str(p.skill), title: str(p.title) || str(p.skill) };
          break;
        }
        // An approval record, or the checkpoint taken before an edit, belongs on its card.
        if ((it.kind === "approval" || it.kind === "checkpoint_created") && p && typeof p === "object") {
          let card: ToolCardItem | undefined;
          for (let k = out.length - 1; k >= 0 && !card; k--) {
            const c = out[k];
            if (c.type === "toolCard" && c.id === str(p.callId)) card = c;
          }
          if (card && it.kind === "approval") {
            card.decision = normalizeDecision(p);
            break;
          }
          if (card && typeof p.id === "number") {
            card.checkpoint = p.id;
            break;
          }
        }
        // A request too long for the model's context was asked again, fitted: the failure
        // it recovered from is said by the notice that says so, not shown as a failed turn.
        if (it.kind === "context_reduced") {
          const last = out.at(-1);
          if (last?.type === "notice" && last.kind === "turn_failed") out.pop();
        }
        out.push({ type: "notice", key, seq, kind: str(it.kind), payload: it.payload ?? null });
        break;
      }
      default:
        out.push({ type: "notice", key, seq, kind: type || "unknown", payload: it });
    }
  }
  closeTurn();
  return out;
}

function findLastUser(items: ChatItem[]): Extract<ChatItem, { type: "user" }> | undefined {
  for (let k = items.length - 1; k >= 0; k--) {
    const it = items[k];
    if (it.type === "user") return it;
  }
  return undefined;
}

export function normalizeUsage(e: Record<string, unknown>): Usage {
  return {
    inputTokens: num(e.inputTokens),
    outputTokens: num(e.outputTokens),
    cacheReadTokens: num(e.cacheReadTokens),
    cacheCreationTokens: num(e.cacheCreationTokens),
    ...(e.estimated === true ? { estimated: true } : {}),
  };
}

export function addUsage(a: Usage | null, b: Usage): Usage {
  if (!a) return { ...b };
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheReadTokens: a.cacheReadTokens + b.cacheReadTokens,
    cacheCreationTokens: a.cacheCreationTokens + b.cacheCreationTokens,
    ...(a.estimated || b.estimated ? { estimated: true } : {}),
  };
}

/** The history notice that says the same as a `turnEnded` of this kind (so it is shown once). */
export const NOTICE_OF_END: Partial<Record<TurnEnd, string>> = {
  failed: "turn_failed",
  toolCallLimit: "tool_call_limit",
  cancelled: "turn_cancelled",
};

/** A notice as text: an i18n key, its values and how loud it is. */
export interface NoticeText {
  key: Key;
  vars: Record<string, string | number>;
  level: "error" | "warn" | "info";
  /** Extra text shown as is (a payload, a digest). */
  detail: string;
  /** Text written for logs (a provider's error), shown only folded away, on request. */
  technical?: string;
}

/** Why a turn failed, as a person can act on it, read from the provider's error (written
 *  for logs: a URL, a DNS or TLS error, an HTTP status). */
export type FailureKind = "network" | "auth" | "rateLimit" | "server" | "timeout" | "model" | "other";

export function failureKind(detail: string): FailureKind {
  const d = detail.toLowerCase();
  if (/\b(401|403)\b|unauthori[sz]ed|invalid[_ ]api[_ ]key|authentication|permission denied|forbidden/.test(d)) return "auth";
  if (/\b429\b|rate[_ ]limit|too many requests|overloaded|quota/.test(d)) return "rateLimit";
  if (/timed? ?out|timeout|deadline/.test(d)) return "timeout";
  if (/\b404\b.*model|model.*(not found|does not exist|unknown)|no such model/.test(d)) return "model";
  if (/dns|resolve|connection refused|connect(ion)? (error|failed|reset)|network|unreachable|error sending request|tls|certificate/.test(d)) return "network";
  if (/\b5\d\d\b|server error|bad gateway|service unavailable/.test(d)) return "server";
  return "other";
}

/** What to say for a history notice or a turn's end. */
export function noticeText(item: Extract<ChatItem, { type: "notice" | "turnEnd" }>): NoticeText {
  if (item.type === "turnEnd") {
    if (item.end === "failed") return failedTurn(item.detail ?? "");
    if (item.end === "toolCallLimit") return { key: "chat.notice.limit", vars: { n: item.detail ?? "?" }, level: "warn", detail: "" };
    if (item.end === "cancelled") return { key: "chat.notice.cancelled", vars: {}, level: "info", detail: "" };
    return { key: "chat.notice.finished", vars: {}, level: "info", detail: item.detail ?? "" };
  }
  const p = (item.payload && typeof item.payload === "object" ? item.payload : {}) as Record<string, unknown>;
  switch (item.kind) {
    case "turn_failed":
      return failedTurn(str(p.error));
    case "tool_call_limit":
      return { key: "chat.notice.limit", vars: { n: str(p.limit) || "?" }, level: "warn", detail: "" };
    case "turn_cancelled":
      return { key: "chat.notice.cancelled", vars: {}, level: "info", detail: "" };
    case "partial_tool_calls":
      return { key: "chat.notice.partialCalls", vars: {}, level: "warn", detail: "" };
    case "checkpoint_created":
      return { key: "chat.notice.checkpoint", vars: {}, level: "info", detail: "" };
    case "context_lean":
      return { key: "chat.notice.contextLean", vars: { n: str(p.window) || "?" }, level: "info", detail: "" };
    case "context_reduced":
      return { key: "chat.notice.contextReduced", vars: { n: str(p.limit) || "?" }, level: "warn", detail: "" };
    case "tools_unavailable":
      return { key: "chat.notice.toolsUnavailable", vars: { model: str(p.model) }, level: "warn", detail: "" };
    case "reply_cut":
      return p.reason === "repetition"
        ? { key: "chat.notice.cutRepetition", vars: {}, level: "warn", detail: "" }
        : { key: "chat.notice.cutLength", vars: { n: str(p.limit) || "?" }, level: "warn", detail: "" };
    case "handoff_seeded":
      return { key: "chat.notice.handoff", vars: {}, level: "info", detail: str(p.digest) };
    default:
      return { key: "chat.notice.other", vars: { kind: item.kind }, level: "info", detail: "" };
  }
}

/** A failed turn: what went wrong in plain words, the provider's own text only as the
 *  technical detail a person may open. */
function failedTurn(detail: string): NoticeText {
  return { key: `chat.fail.${failureKind(detail)}` as Key, vars: {}, level: "error", detail: "", technical: detail };
}

/** The first lines of a tool result, for the card; `error` when it is an `Error:` result. */
export function summarizeResult(result: string | null, maxLines = 6, maxChars = 600): { text: string; truncated: boolean; error: boolean } {
  const full = result ?? "";
  let text = full.split("\n").slice(0, maxLines).join("\n");
  if (text.length > maxChars) text = text.slice(0, maxChars);
  return { text: text.replace(/\s+$/, ""), truncated: text.length < full.trimEnd().length, error: full.startsWith("Error:") };
}

/** Why a call did not give the person a result of its own, as the card says it. */
export type ResultKind =
  | "limit"
  | "cutOff"
  | "cancelled"
  | "interrupted"
  | "badCall"
  | "declined"
  | "noAnswer"
  | "noApprover"
  | "deviceControlOff"
  | "neverAllowed"
  | "needsApproval"
  | "needsPerson"
  | "denied"
  | "blocked"
  | "timeout"
  | "crashed"
  | "noCheckpoint"
  | "unknownTool"
  | "notFound"
  | "invalid"
  | "failed";

/** The person's words for a card whose call did not succeed: an i18n key chosen by the
 *  card's status and the kind of refusal or failure, never the backend's text. Every
 *  result that is not a success is written for the model (`Error: not run – … tell the
 *  user …`, a guard's or tier's reason naming the command, `InvalidParams: …`): the model
 *  still reads it, the card shows this instead. Null for a success (its data is shown). */
export function personResult(status: CardStatus, result: string | null): { kind: ResultKind; key: Key; vars: Record<string, string | number> } | null {
  const text = (result ?? "").trim();
  const isError = text.startsWith("Error:");
  if (!isError && !["error", "denied", "blocked", "interrupted"].includes(status)) return null;
  const say = (kind: ResultKind, vars: Record<string, string | number> = {}) => ({ kind, key: `chat.result.${kind}` as Key, vars });
  const why = text.replace(/^Error:\s*/, "");
  if (status === "interrupted" || /^no result \(interrupted\)/.test(why)) return say("interrupted");
  const limit = /^not run – this turn reached its limit of (\d+) tool calls/.exec(why);
  if (limit) return say("limit", { n: Number(limit[1]) });
  if (/^not run – the reply was cut off/.test(why)) return say("cutOff");
  if (/^cancelled – /.test(why) || /^`[^`]*` was cancelled$/.test(why)) return say("cancelled");
  if (/^invalid arguments/.test(why) || /^meta_executeCommand:/.test(why)) return say("badCall");
  if (status === "blocked" || /^blocked by /.test(why)) return say("blocked");
  if (status === "denied" || /^denied: /.test(why)) {
    const reasons = why.replace(/^denied: /, "");
    if (/the user declined: cancelled/.test(reasons)) return say("cancelled");
    if (/the user declined: no answer/.test(reasons)) return say("noAnswer");
    if (/the user declined/.test(reasons)) return say("declined");
    if (/nobody can be asked here/.test(reasons)) return say("noApprover");
    if (/controls a device/.test(reasons)) return say("deviceControlOff");
    if (/blocked for automated callers/.test(reasons)) return say("neverAllowed");
    if (/edits the project and needs approval/.test(reasons)) return say("needsApproval");
    if (/always needs a person|needs a person to approve this very call|needs a fresh approval every time/.test(reasons)) return say("needsPerson");
    return say("denied");
  }
  if (/ timed out after /.test(why)) return say("timeout");
  if (/ crashed: /.test(why)) return say("crashed");
  if (/^could not take a checkpoint/.test(why)) return say("noCheckpoint");
  if (/^unknown tool /.test(why)) return say("unknownTool");
  // A command's own failure, as the assistant's door spells it: `{code:?}: {message}`.
  const code = /^([A-Z][A-Za-z]+): /.exec(why)?.[1];
  if (code === "NotFound") return say("notFound");
  if (code === "InvalidParams" || code === "BadRequest") return say("invalid");
  if (code === "UnknownCommand") return say("unknownTool");
  if (code === "NotAllowed") return say("denied");
  if (code === "Denied") return say("declined");
  if (code === "NeedsConfirmation") return say("needsPerson");
  return say("failed");
}

/** Arguments as indented JSON; "" while they are still streaming. */
export function prettyArgs(args: unknown): string {
  if (args === undefined) return "";
  try {
    return JSON.stringify(args, null, 2) ?? String(args);
  } catch {
    return String(args);
  }
}

/** Words a first message often starts with that say nothing about what it is about
 *  (greetings, politeness, "can you", "I'd like to", the "add a" of most requests), in
 *  English and Chinese; stripped from the start again and again. Other verbs ("remove",
 *  "why") stay: they are what the chat is about. */
const TITLE_FILLER: RegExp[] = [
  /^(?:hi|hey|hello|ok|okay|so|now|just|also|and|then|well|right)\b[\s,.!:;-]*/i,
  /^(?:please|pls|plz|kindly)\b[\s,.!:;-]*/i,
  /^(?:can|could|would|will)\s+(?:you|u)\b(?:\s+please\b)?[\s,]*/i,
  /^(?:i(?:'d| would)\s+like\s+(?:to\s+)?|i\s+(?:want|need|wanna)(?:\s+to)?\b|let'?s\b|let\s+us\b|help\s+me\b(?:\s+to\b)?)[\s,]*/i,
  /^(?:add|create|insert|set\s+up|setup)\b\s*/i,
  /^(?:a|an|the|some|new|another|me)\b\s+/i,
  /^(?:你好|您好|嗨|好的|那么|现在|然后)[，,、\s]*/,
  /^(?:请你|请(?!问)|麻烦你?|劳驾)[，,、\s]*/,
  /^(?:你能不能|你能否|你可以|你能|能不能|能否|可不可以|可以)[，,、\s]*/,
  /^(?:帮我|帮忙|给我|替我|我想要|我想|我要|我需要)[，,、\s]*/,
  /^(?:添加|新建|创建|增加|新增|加上|加)[，,、\s]*/,
  /^(?:一个|一张|一条|一块|一些|个)[，,、\s]*/,
];

/** Words a cut title should not end on (it would read as unfinished twice). */
const TITLE_DANGLING = /\s+(?:a|an|the|of|for|to|in|on|at|with|and|or|by|from|that|which|as|is)$/i;

/** A title for a new chat from its first message: its first line without the filler most
 *  requests start with ("Please add a gauge for the engine RPM" → "Gauge for the engine
 *  RPM"), so chats started alike still read apart in the narrow list; at most `max`
 *  characters, cut at a word boundary with an ellipsis (Chinese, written without spaces,
 *  at a character). A message that is all filler keeps its own words. */
export function titleFrom(text: string, max = 48): string {
  const line = (text.trim().split("\n").find((l) => l.trim()) ?? "").trim().replace(/\s+/g, " ").replace(/^[#>*\-\s]+/, "");
  let rest = line;
  for (let changed = true; changed; ) {
    changed = false;
    for (const re of TITLE_FILLER) {
      const next = rest.replace(re, "");
      if (next !== rest && next.trim()) {
        rest = next.trim();
        changed = true;
      }
    }
  }
  rest = rest.replace(/[.。!！]+$/, "").trim();
  // Nothing but filler ("add a"): the message's own words.
  let title = !rest || /^(?:a|an|the|some|me|it|this|that|one|个|一个)$/i.test(rest) ? line : rest;
  // The filler went; the title starts like a sentence.
  if (title !== line) title = title.charAt(0).toUpperCase() + title.slice(1);
  if (title.length <= max) return title;
  let cut = title.slice(0, max - 1);
  const space = cut.lastIndexOf(" ");
  if (space >= max / 2) cut = cut.slice(0, space);
  for (let prev = ""; prev !== cut; ) {
    prev = cut;
    cut = cut.replace(/[\s,;:，、；：-]+$/, "").replace(TITLE_DANGLING, "");
  }
  return `${cut}…`;
}

/** Whether a base URL is a server on this computer or the local network (loopback, a
 *  private or link-local address, `localhost`, `.local`, or a bare host name), which needs
 *  no API key – the same rule the backend's capability table uses, plus LAN names. */
export function isLocalUrl(url: string): boolean {
  let host: string;
  try {
    host = new URL(url.trim()).hostname.toLowerCase();
  } catch {
    return false;
  }
  host = host.replace(/^\[|\]$/g, "");
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (v4) {
    const [a, b] = [Number(v4[1]), Number(v4[2])];
    return a === 127 || a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 169 && b === 254);
  }
  if (host.includes(":")) return host === "::1" || /^f[cd][0-9a-f]{0,2}:/.test(host);
  if (host === "localhost" || host.endsWith(".localhost") || host.endsWith(".local") || host.endsWith(".lan") || host.endsWith(".internal") || host.endsWith(".home.arpa")) return true;
  // A bare name (`gpu-box`) is a machine on the local network.
  return host !== "" && !host.includes(".");
}

/** What is missing before a message can go to the model: no base URL, no model, or no API
 *  key for a hosted provider (a server on this computer or the local network needs none).
 *  Null when nothing is – or while the settings are not known yet (the backend then says
 *  what is wrong itself). */
export type ProviderGap = "noUrl" | "noModel" | "noKey";
export function providerGap(s: Pick<SettingsView, "provider" | "baseUrl" | "model" | "hasApiKey"> | null | undefined): ProviderGap | null {
  if (!s) return null;
  const url = (s.baseUrl ?? "").trim();
  if (!url) return "noUrl";
  if (!s.hasApiKey && !isLocalUrl(url)) return "noKey";
  if (!(s.model ?? "").trim()) return "noModel";
  return null;
}

/** The base URL after switching provider: the new provider's default when the field held
 *  the old one's default (or nothing); a custom URL stays. */
export function baseUrlForProvider(current: string, from: Provider, to: Provider): string {
  const norm = (u: string) => u.trim().replace(/\/+$/, "");
  if (from === to) return current;
  if (!norm(current) || norm(current) === norm(DEFAULT_BASE_URL[from])) return DEFAULT_BASE_URL[to];
  return current;
}

/** The model a provider starts with. Anthropic's is the backend's own default; what an
 *  OpenAI-compatible server serves depends on the server (OpenAI, Ollama, LM Studio…), so
 *  none is assumed: the person loads its list, which picks the first listed, or types one. */
export const DEFAULT_MODEL: Record<Provider, string> = {
  anthropic: "claude-sonnet-4-5",
  "openai-compatible": "",
};

/** The model after switching provider: the one the form last held for that provider (when
 *  switching back), else that provider's default – never the old provider's model, which
 *  the new one does not serve. */
export function modelForProvider(current: string, from: Provider, to: Provider, remembered: Partial<Record<Provider, string>> = {}): string {
  if (from === to) return current;
  return remembered[to]?.trim() || DEFAULT_MODEL[to];
}

/** The `setSettings` request for a form: every editable field, and `apiKey` only when the
 *  person typed one (`null` forgets the stored key). */
export function settingsRequest(form: EditableSettings, apiKey?: string | null): Record<string, unknown> & { op: "setSettings" } {
  const req: Record<string, unknown> & { op: "setSettings" } = {
    op: "setSettings",
    provider: form.provider,
    baseUrl: form.baseUrl.trim(),
    model: form.model.trim(),
    autoApproveEdits: form.autoApproveEdits,
    allowDeviceControl: form.allowDeviceControl,
    ...mechanismsOf(form),
    constrainedCalls: form.constrainedCalls,
    ...Object.fromEntries(LIMIT_FIELDS.map((f) => [f, limitValue(form[f])])),
  };
  if (apiKey === null) req.apiKey = null;
  else if (typeof apiKey === "string" && apiKey.trim()) req.apiKey = apiKey.trim();
  return req;
}

/** Tokens as short text: 950, 12.3k, 1.2M. */
export function formatTokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}

const isExecute = (name: string) => name === "meta_executeCommand" || name === "meta.executeCommand";

const dotted = (name: string) => (name.startsWith("meta_") || name.startsWith("meta.") ? name : name.replace(/_/g, "."));

/** The command a card is about and its arguments. `meta_executeCommand {name, params}` is
 *  only the way the model reached a command it was not offered as a tool: the card shows
 *  that command and its `params` (a JSON string of them, which the backend accepts from
 *  weak models, read the same way), as the pipeline runs it. The card may already carry
 *  the inner command's name (the approval prompt names it) with the wrapper's arguments
 *  still: `{name, params}` naming the card's own command is unwrapped too. Names are
 *  dotted: `project_dataset_add` → `project.dataset.add` (command names have no `_`).
 *  Arguments stay undefined while the model is still writing them. */
export function commandCall(name: string, args: unknown): { name: string; args: unknown } {
  if (args && typeof args === "object" && !Array.isArray(args)) {
    const a = args as Record<string, unknown>;
    const wrapper =
      typeof a.name === "string" &&
      a.name.trim() !== "" &&
      Object.keys(a).every((k) => k === "name" || k === "params") &&
      (isExecute(name) || dotted(a.name.trim()) === dotted(name));
    if (wrapper) {
      let params = a.params ?? {};
      if (typeof params === "string") {
        try {
          params = JSON.parse(params);
        } catch {
          // Not JSON: shown as the model wrote it (the call fails and says why).
        }
      }
      return { name: dotted((a.name as string).trim()), args: params };
    }
  }
  return { name: dotted(name), args };
}

/** The dotted name of the command a card is about (see `commandCall`). */
export function commandName(name: string, args: unknown): string {
  return commandCall(name, args).name;
}

/** The app's check of an edit, folded into its result (`verification: {ok, method,
 *  detail}`), or null for a result without one. */
export function verificationOf(result: string | null): { ok: boolean; method: string; detail: string } | null {
  if (!result || result.startsWith("Error:")) return null;
  try {
    const v = (JSON.parse(result) as { verification?: unknown }).verification as Record<string, unknown> | undefined;
    if (!v || typeof v !== "object" || typeof v.ok !== "boolean") return null;
    return { ok: v.ok, method: str(v.method), detail: str(v.detail) };
  } catch {
    return null;
  }
}

/** What a failed check of an edit means, in the person's words, by the check it ran (the
 *  check's own finding – a compiler's message, the fields read back – follows as detail). */
export function verifyWhyKey(method: string): Key {
  switch (method) {
    case "project.frameParser.dryCompile":
      return "chat.verify.why.compile";
    case "project.transform.dryRun":
      return "chat.verify.why.transform";
    case "project.validate":
      return "chat.verify.why.validate";
    case "project.dryRun.endToEnd":
      return "chat.verify.why.recentBytes";
    default:
      // The other checks read the edited object back (`project.get`, `project.dataset.get`…).
      return /^project\.([a-zA-Z]+\.)*(get|list)$/.test(method) ? "chat.verify.why.readBack" : "chat.verify.why.other";
  }
}

/** The context probe's banner text for a degraded chat: "missing", or "mutated `idsfresh`". */
export function degradedText(d: Degraded): { key: Key; vars: Record<string, string> } {
  if (d.verdict === "mutated") {
    const drift = d.drift ?? "format";
    if (drift === "format") return { key: "chat.probe.mutatedFormat", vars: {} };
    if (drift === "truncated") return { key: "chat.probe.mutatedTruncated", vars: {} };
    return { key: "chat.probe.mutated", vars: { anchor: drift } };
  }
  return { key: "chat.probe.missing", vars: {} };
}

/** A chat as Markdown, from its rows as the person sees them (the probe's sentinel is
 *  already gone from every assistant text the history gives). */
export function chatMarkdown(title: string, items: ChatItem[], labels: { you: string; assistant: string; cited?: string }): string {
  const out = [`# ${title}`, ""];
  for (const item of items) {
    if (item.type === "user") out.push(`**${labels.you}:** ${item.text}`, "");
    else if (item.type === "assistant") out.push(`**${labels.assistant}:** ${item.text}`, "");
    else if (item.type === "toolCard") {
      const call = commandCall(item.name, item.args);
      out.push(`- \`${call.name}\` ${JSON.stringify(call.args ?? {})} → ${item.status}`, "");
    }
    else if (item.type === "citation") {
      const each = item.sources.map((s) => `“${s.title}” (${s.cited.join(", ")})`).join("; ");
      out.push(`> ${labels.cited ?? "Cited"}: ${each}`, "");
    }
  }
  return out.join("\n").trimEnd() + "\n";
}
