// The desktop transport's chat requests and chat event channel, against a mocked `invoke`.
import { beforeEach, describe, expect, it, vi } from "vitest";

const invoked: { cmd: string; args: any }[] = [];
let answer: (cmd: string, args: any) => unknown = () => null;

vi.mock("@tauri-apps/api/core", () => ({
  invoke: async (cmd: string, args: any) => {
    invoked.push({ cmd, args });
    return answer(cmd, args);
  },
  Channel: class {
    onmessage: (m: unknown) => void = () => {};
  },
}));

const { TauriTransport } = await import("../src/lib/transport/tauri");
const { CommandError } = await import("../src/lib/transport/types");

beforeEach(() => {
  invoked.length = 0;
  answer = () => null;
});

describe("Tauri transport: chats", () => {
  it("sends chat requests through invoke(\"chat\", {request})", async () => {
    answer = (cmd, args) => (cmd === "chat" && args.request.op === "create" ? { id: 7 } : null);
    const t = new TauriTransport();
    await expect(t.chat({ op: "create", title: "Gauges" })).resolves.toEqual({ id: 7 });
    expect(invoked).toEqual([{ cmd: "chat", args: { request: { op: "create", title: "Gauges" } } }]);
  });

  it("maps refusals to CommandError like call does", async () => {
    const t = new TauriTransport();
    answer = () => {
      throw { code: "turnRunning", message: "busy" };
    };
    const err = await t.chat({ op: "delete", chat: 1 }).catch((e) => e);
    expect(err).toBeInstanceOf(CommandError);
    expect(err).toMatchObject({ code: "turnRunning", message: "busy" });
    answer = () => {
      throw "no chat service";
    };
    await expect(t.chat({ op: "list" })).rejects.toMatchObject({ code: "failed", message: "no chat service" });
  });

  it("opens one chat channel for all handlers", async () => {
    const t = new TauriTransport();
    const a: unknown[] = [];
    const b: unknown[] = [];
    const offA = t.onChat((e) => a.push(e));
    t.onChat((e) => b.push(e));
    const subs = invoked.filter((i) => i.cmd === "subscribe_chat");
    expect(subs).toHaveLength(1);
    const channel = subs[0].args.channel;
    channel.onmessage({ chat: 2, type: "textDelta", text: "x" });
    offA();
    channel.onmessage({ chat: 2, type: "turnEnded", end: "finished", detail: "end_turn" });
    expect(a).toHaveLength(1);
    expect(b).toHaveLength(2);
  });
});
