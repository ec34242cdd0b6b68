// Item: a tool card never shows the person the note the backend wrote for the model.
// Every result text below is copied from the Rust source that writes it (the comment on
// each row names it): the model still reads those bytes; the card shows plain words.
import { describe, expect, it } from "vitest";
import { render } from "svelte/server";
import ToolCard from "../src/chat/ToolCard.svelte";
import { failureKind, noticeText, personResult, type CardStatus, type ToolCardItem } from "../src/chat/protocol";
import { strings } from "../src/chat/strings";

const BACKEND_RESULTS: { source: string; status: CardStatus; result: string; kind: string }[] = [
  // crates/assistant/src/engine/conversation.rs: run_reply_calls (the turn's call cap)
  { source: "conversation.rs run_reply_calls", status: "error", kind: "limit", result: "Error: not run – this turn reached its limit of 3 tool calls; tell the user what is left to do" },
  // crates/assistant/src/engine/conversation.rs: settle, StreamEnd::Failed
  { source: "conversation.rs settle (Failed)", status: "error", kind: "cutOff", result: "Error: not run – the reply was cut off before it finished" },
  // crates/assistant/src/engine/conversation.rs: settle, StreamEnd::Malformed
  { source: "conversation.rs settle (Malformed)", status: "error", kind: "badCall", result: 'Error: invalid arguments – not valid JSON (EOF while parsing an object at line 1 column 9); raw arguments: {"name": – call the tool again with a JSON object' },
  // crates/assistant/src/engine/conversation.rs: cancelled()
  { source: "conversation.rs cancelled()", status: "error", kind: "cancelled", result: "Error: cancelled – the user stopped the turn; the call may not have finished" },
  // crates/assistant/src/engine/conversation.rs: run_calls (tools.resolve failed) and tools.rs ToolsError::BadExecuteCall
  { source: "tools.rs BadExecuteCall (name missing)", status: "error", kind: "badCall", result: "Error: meta_executeCommand: `name` (the command's dotted name, e.g. `project.setTitle`) is missing" },
  { source: "tools.rs BadExecuteCall (itself)", status: "error", kind: "badCall", result: "Error: meta_executeCommand: it cannot run itself; name the command to run" },
  { source: "tools.rs BadExecuteCall (params)", status: "error", kind: "badCall", result: "Error: meta_executeCommand: `params` must be an object of the command's parameters" },
  { source: "tools.rs BadExecuteCall (extra)", status: "error", kind: "badCall", result: "Error: meta_executeCommand: unexpected argument `port`; the command's parameters go inside `params`" },
  { source: "tools.rs BadExecuteCall (not object)", status: "error", kind: "badCall", result: 'Error: meta_executeCommand: arguments must be an object {"name": …, "params": {…}}, not 3' },
  // crates/assistant/src/engine/chatlog/fold.rs: INTERRUPTED (the card is interrupted, or pending→error in older logs)
  { source: "fold.rs INTERRUPTED", status: "interrupted", kind: "interrupted", result: "Error: no result (interrupted)" },
  { source: "fold.rs INTERRUPTED", status: "error", kind: "interrupted", result: "Error: no result (interrupted)" },
  // crates/assistant/src/engine/pipeline/mod.rs: decide_and_execute → denied() ("denied: " + reasons)
  { source: "pipeline/mod.rs no approver", status: "denied", kind: "noApprover", result: "Error: denied: `project.dataset.add` needs a person's approval (Add a dataset to the group) and nobody can be asked here" },
  { source: "pipeline/mod.rs remembered allow", status: "denied", kind: "needsPerson", result: "Error: denied: `device.write` needs a fresh approval every time; a remembered one does not count" },
  { source: "pipeline/mod.rs declined with reason", status: "denied", kind: "declined", result: "Error: denied: the user declined: use the other port" },
  { source: "pipeline/mod.rs declined", status: "denied", kind: "declined", result: "Error: denied: the user declined" },
  // crates/assistant/src/service.rs: Approval::Denied(Some("no answer")) / ("cancelled"), through pipeline/mod.rs
  { source: "service.rs approval timeout", status: "denied", kind: "noAnswer", result: "Error: denied: the user declined: no answer" },
  { source: "service.rs approval cancelled", status: "denied", kind: "cancelled", result: "Error: denied: the user declined: cancelled" },
  // crates/commands/src/policy.rs: denial_reason, via pipeline/tiers.rs (TierPolicy, DeviceControlGuard, TierBlockGuard)
  { source: "policy.rs denial_reason DeviceGated", status: "denied", kind: "deviceControlOff", result: 'Error: denied: this command controls a device; enable "allow device control" first' },
  { source: "policy.rs denial_reason Blocked", status: "denied", kind: "neverAllowed", result: "Error: denied: this command is blocked for automated callers" },
  { source: "policy.rs denial_reason Confirm", status: "denied", kind: "needsApproval", result: "Error: denied: this command edits the project and needs approval; enable auto-approve of edits" },
  { source: "policy.rs denial_reason AlwaysConfirm", status: "denied", kind: "needsPerson", result: "Error: denied: this command is destructive and always needs a person to approve it" },
  { source: "policy.rs denial_reason other", status: "denied", kind: "denied", result: "Error: denied: not allowed" },
  // crates/assistant/src/engine/pipeline/tiers.rs: PersonApprovalGuard
  { source: "tiers.rs PersonApprovalGuard", status: "denied", kind: "needsPerson", result: "Error: denied: `device.connect` (deviceGated) needs a person to approve this very call" },
  // several guards at once (pipeline/mod.rs joins them with "; ")
  { source: "pipeline/mod.rs joined denials", status: "denied", kind: "deviceControlOff", result: 'Error: denied: this command controls a device; enable "allow device control" first; `device.connect` (deviceGated) needs a person to approve this very call' },
  // crates/assistant/src/engine/pipeline/post.rs: PostAction::Block
  { source: "post.rs PostAction::Block", status: "blocked", kind: "blocked", result: "Error: blocked by redact: the result holds a secret" },
  // crates/assistant/src/engine/pipeline/exec.rs: ToolError's Display
  { source: "exec.rs ToolError::Timeout", status: "error", kind: "timeout", result: "Error: `project_dataset_add` timed out after 30s" },
  { source: "exec.rs ToolError::Panicked", status: "error", kind: "crashed", result: "Error: `project_dataset_add` crashed: index out of bounds: the len is 0 but the index is 0" },
  { source: "exec.rs ToolError::Cancelled", status: "error", kind: "cancelled", result: "Error: `project_dataset_add` was cancelled" },
  // crates/assistant/src/engine/pipeline/exec.rs and runtime.rs: unknown tool
  { source: "exec.rs / runtime.rs unknown tool", status: "error", kind: "unknownTool", result: "Error: unknown tool `project_fly`" },
  // crates/assistant/src/engine/pipeline/tiers.rs: CheckpointBeforeEdit
  { source: "tiers.rs CheckpointBeforeEdit", status: "error", kind: "noCheckpoint", result: "Error: could not take a checkpoint before `project.dataset.add` (disk full); nothing was changed" },
  // crates/assistant/src/engine/pipeline/runtime.rs: a command's error, `{code:?}: {message}` (at path)
  { source: "runtime.rs NotFound", status: "error", kind: "notFound", result: "Error: NotFound: no dataset `ds-9` in group `g-1`" },
  { source: "runtime.rs InvalidParams", status: "error", kind: "invalid", result: "Error: InvalidParams: `min` must be below `max` (at /widget/min)" },
  { source: "runtime.rs BadRequest", status: "error", kind: "invalid", result: "Error: BadRequest: the request is too large" },
  { source: "runtime.rs UnknownCommand", status: "error", kind: "unknownTool", result: "Error: UnknownCommand: no command `project.fly`" },
  { source: "runtime.rs NotAllowed", status: "error", kind: "denied", result: "Error: NotAllowed: this command is blocked for automated callers" },
  { source: "runtime.rs Denied", status: "error", kind: "declined", result: "Error: Denied: the user declined" },
  { source: "runtime.rs NeedsConfirmation", status: "error", kind: "needsPerson", result: "Error: NeedsConfirmation: run the program `C:\\tools\\flash.exe`?" },
  { source: "runtime.rs Failed", status: "error", kind: "failed", result: "Error: Failed: could not open port COM3: Access is denied. (os error 5)" },
];

/** What no person should read on a card. */
const INTERNALS = [
  "tell the user", "Error:", "project.", "project_", "meta_", "`",
  "NotFound", "InvalidParams", "BadRequest", "UnknownCommand", "NotAllowed", "NeedsConfirmation", "deviceGated", "alwaysConfirm",
  "not run –", "raw arguments", "interrupted)",
];

/** A string of the panel's dictionaries by a key `personResult` chose. */
const say = (lang: "en" | "zh", key: string) => (strings[lang] as Record<string, string>)[key];
const fill = (s: string, vars: Record<string, string | number>) => s.replace(/\{(\w+)\}/g, (_, k) => String(vars[k] ?? `{${k}}`));

describe("a tool card's result as the person reads it", () => {
  it.each(BACKEND_RESULTS)("$source ($status) → $kind", ({ status, result, kind }) => {
    const plain = personResult(status, result);
    expect(plain).not.toBeNull();
    expect(plain!.kind).toBe(kind);
    for (const lang of ["en", "zh"] as const) {
      const text = fill(say(lang, plain!.key), plain!.vars);
      expect(text.length).toBeGreaterThan(0);
      for (const bad of INTERNALS) expect(text, `${lang}: ${text}`).not.toContain(bad);
      // The person's words are never the model's note.
      expect(result).not.toContain(text);
    }
  });

  it("the call cap reads as plain words", () => {
    const plain = personResult("error", BACKEND_RESULTS[0].result)!;
    expect(say("en", plain.key)).toBe("Not run: the assistant reached its limit of tool calls for one message.");
  });

  it("a failed status without a result still says something plain, a success shows its data", () => {
    expect(personResult("denied", null)?.kind).toBe("denied");
    expect(personResult("blocked", "")?.kind).toBe("blocked");
    expect(personResult("interrupted", null)?.kind).toBe("interrupted");
    expect(personResult("error", "")?.kind).toBe("failed");
    expect(personResult("ok", '{"id":"ds-1"}')).toBeNull();
    expect(personResult("running", null)).toBeNull();
    expect(personResult("pending", null)).toBeNull();
  });

  it("the card shows the plain sentence, never the model's note", () => {
    for (const row of BACKEND_RESULTS) {
      const card: ToolCardItem = {
        type: "toolCard", key: "c1", seq: 3, id: "call-1", name: "project_dataset_add", args: { title: "RPM" },
        status: row.status, result: row.result, approval: null, decision: null, checkpoint: null,
      };
      const { body } = render(ToolCard, { props: { card, store: {} as never } });
      const shown = /data-testid="tool-result"[^>]*>([\s\S]*?)<\/div>/.exec(body)?.[1] ?? "";
      expect(shown, row.source).toContain(say("en", personResult(row.status, row.result)!.key).slice(0, 12));
      expect(body, row.source).not.toContain("tell the user");
      expect(body, row.source).not.toContain(row.result.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/"/g, "&quot;"));
      for (const bad of ["tell the user", "Error:", "meta_", "NotFound", "InvalidParams"]) expect(shown, row.source).not.toContain(bad);
    }
  });
});

describe("a failed turn in plain words", () => {
  it.each([
    ["anthropic request failed: error sending request for url (https://api.anthropic.com/v1/messages): dns error: failed to lookup address information", "network"],
    ["openai-compatible: connection refused (os error 111)", "network"],
    ["provider: 401 invalid x-api-key", "auth"],
    ["anthropic: HTTP 429 rate_limit_error: Number of request tokens has exceeded your per-minute rate limit", "rateLimit"],
    ["anthropic: overloaded_error", "rateLimit"],
    ["openai-compatible: HTTP 404: model 'gpt-9' not found", "model"],
    ["the provider did not answer within 120 s (timed out)", "timeout"],
    ["openai-compatible: HTTP 502 Bad Gateway", "server"],
    ["something nobody foresaw", "other"],
  ])("%s → %s", (detail, kind) => {
    expect(failureKind(detail)).toBe(kind);
    const n = noticeText({ type: "turnEnd", key: "k", end: "failed", detail } as never);
    expect(n.key).toBe(`chat.fail.${kind}`);
    expect(n.detail).toBe("");
    expect(n.technical).toBe(detail);
  });
});

describe("a failed check of an edit, in the person's words", () => {
  it("names what the check found by the check it ran, in both languages", async () => {
    const { verifyWhyKey } = await import("../src/chat/protocol");
    const { t } = await import("../src/lib/i18n/index.svelte");
    const { settings } = await import("../src/lib/settings.svelte");
    const rows: [string, string][] = [
      ["project.frameParser.dryCompile", "the parser does not compile."],
      ["project.transform.dryRun", "the transform fails on a test value."],
      ["project.validate", "the project has problems after this edit."],
      ["project.dryRun.endToEnd", "the newest data from the device does not come out as values."],
      ["project.dataset.get", "read back, it is not what was asked."],
      ["project.get", "read back, it is not what was asked."],
      ["project.workspace.list", "read back, it is not what was asked."],
      ["something.new", "see what it found below."],
    ];
    for (const [method, english] of rows) {
      settings.language = "en";
      expect(t(verifyWhyKey(method))).toBe(english);
      settings.language = "zh";
      expect(t(verifyWhyKey(method))).not.toMatch(/[A-Za-z]/);
    }
    settings.language = "en";
  });
});
