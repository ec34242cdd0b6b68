// Every queue, buffer and list the UI keeps has a named cap: each test pushes past one and
// checks the cap holds and that what is kept is the newest (or that the extra is refused).
import { afterEach, describe, expect, it, vi } from "vitest";
import { MAX_TOASTS, notify, toasts } from "../src/dashboard/toasts.svelte";
import { MAX_CHARS, MAX_HISTORY, rememberSent, trimOutput, type TextLike } from "../src/widgets/terminalBuffer";
import { ConsentQueue, MAX_WAITING } from "../src/lib/consent.svelte";
import { withConsent } from "../src/lib/transport/consent";
import { CommandError, type Transport } from "../src/lib/transport/types";
import { MAX_TURN_EXTRAS, keepExtras } from "../src/chat/store.svelte";

afterEach(() => {
  vi.useRealTimers();
});

describe("toasts: MAX_TOASTS", () => {
  it("keeps only the newest MAX_TOASTS when more are notified", () => {
    vi.useFakeTimers();
    toasts.splice(0);
    const n = MAX_TOASTS + 3;
    for (let i = 0; i < n; i++) notify("info", `toast ${i}`);
    expect(toasts).toHaveLength(MAX_TOASTS);
    expect(toasts.map((t) => t.title)).toEqual(Array.from({ length: MAX_TOASTS }, (_, k) => `toast ${n - MAX_TOASTS + k}`));
    toasts.splice(0);
  });
});

/** A stand-in for the console's DOM Text node. */
class FakeText implements TextLike {
  constructor(public data = "") {}
  get length() {
    return this.data.length;
  }
  appendData(s: string) {
    this.data += s;
  }
  deleteData(offset: number, count: number) {
    this.data = this.data.slice(0, offset) + this.data.slice(offset + count);
  }
}

describe("console widget: MAX_CHARS and MAX_HISTORY", () => {
  it("output past MAX_CHARS keeps the newest MAX_CHARS characters", () => {
    const node = new FakeText();
    node.appendData("a".repeat(MAX_CHARS - 10));
    trimOutput(node);
    expect(node.length).toBe(MAX_CHARS - 10);
    node.appendData("b".repeat(25));
    trimOutput(node);
    expect(node.length).toBe(MAX_CHARS);
    expect(node.data.endsWith("b".repeat(25))).toBe(true);
    expect(node.data.startsWith("a")).toBe(true);
    // One chunk alone larger than the cap: only its end stays.
    node.appendData("0123456789".repeat(MAX_CHARS / 10 + 1));
    trimOutput(node);
    expect(node.length).toBe(MAX_CHARS);
    expect(node.data).toBe("0123456789".repeat(MAX_CHARS / 10));
  });

  it("sent lines past MAX_HISTORY keep the newest MAX_HISTORY", () => {
    const history: string[] = [];
    const n = MAX_HISTORY + 3;
    for (let i = 0; i < n; i++) rememberSent(history, `line ${i}`);
    expect(history).toHaveLength(MAX_HISTORY);
    expect(history[0]).toBe(`line ${n - MAX_HISTORY}`);
    expect(history.at(-1)).toBe(`line ${n - 1}`);
    // As before: no empty line, no line twice in a row.
    rememberSent(history, "");
    rememberSent(history, `line ${n - 1}`);
    expect(history).toHaveLength(MAX_HISTORY);
    expect(history.at(-1)).toBe(`line ${n - 1}`);
  });
});

describe("consent queue: MAX_WAITING", () => {
  it("refuses a question past MAX_WAITING waiting, with the reason, and asks the rest", async () => {
    const queue = new ConsentQueue();
    const answers: Promise<boolean>[] = [];
    // One on screen and MAX_WAITING behind it.
    for (let i = 0; i <= MAX_WAITING; i++) answers.push(queue.ask(`question ${i}`));
    expect(queue.current?.text).toBe("Question 0");
    const refused = queue.ask("one too many");
    await expect(refused).rejects.toThrow(`Not done: ${MAX_WAITING} questions are already waiting for your answer`);
    // Every question let in is still asked, in order; the refused one never is.
    const asked: string[] = [];
    for (let i = 0; i <= MAX_WAITING; i++) {
      asked.push(queue.current!.text);
      queue.current!.answer(i % 2 === 0);
    }
    expect(queue.current).toBeNull();
    expect(asked).toHaveLength(MAX_WAITING + 1);
    expect(asked.at(-1)).toBe(`Question ${MAX_WAITING}`);
    expect(await Promise.all(answers)).toEqual(Array.from({ length: MAX_WAITING + 1 }, (_, i) => i % 2 === 0));
    // With the line answered, questions are asked again.
    void queue.ask("later");
    expect(queue.current?.text).toBe("Later");
  });

  it("a call whose question is refused fails with the reason and is not run", async () => {
    const queue = new ConsentQueue();
    for (let i = 0; i <= MAX_WAITING; i++) void queue.ask(`question ${i}`);
    const calls: boolean[] = [];
    const inner = {
      kind: "websocket",
      async call(_command: string, _params: unknown, approved = false) {
        calls.push(approved);
        if (!approved) throw new CommandError({ code: "needsConfirmation", message: "runs `sh`" });
        return "ran";
      },
    } as unknown as Transport;
    await expect(withConsent(inner, queue.ask).call("io.connect")).rejects.toThrow(/questions are already waiting/);
    expect(calls).toEqual([false]);
  });
});

describe("chat store: MAX_TURN_EXTRAS", () => {
  it("keeps the newest MAX_TURN_EXTRAS turns over all chats", () => {
    const all = new Map<number, Map<number, string>>();
    const n = MAX_TURN_EXTRAS + 3;
    // Chat 1's turns first, then chat 2's.
    for (let i = 0; i < n; i++) keepExtras(all, i < 10 ? 1 : 2, i, `turn ${i}`);
    const total = [...all.values()].reduce((s, m) => s + m.size, 0);
    expect(total).toBe(MAX_TURN_EXTRAS);
    // The three oldest (all chat 1's) went; the newest stays.
    expect([...all.get(1)!.keys()]).toEqual([3, 4, 5, 6, 7, 8, 9]);
    expect(all.get(2)!.get(n - 1)).toBe(`turn ${n - 1}`);
  });

  it("a chat that loses every turn is forgotten, and the one just added to is kept", () => {
    const all = new Map<number, Map<number, string>>();
    keepExtras(all, 1, 1, "a", 2);
    keepExtras(all, 2, 1, "b", 2);
    const kept = keepExtras(all, 2, 2, "c", 2);
    expect([...all.keys()]).toEqual([2]);
    expect([...kept.values()]).toEqual(["b", "c"]);
    expect(all.get(2)).toBe(kept);
  });
});
