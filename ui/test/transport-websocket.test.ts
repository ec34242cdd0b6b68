import { afterEach, describe, expect, it, vi } from "vitest";
import { MAX_PENDING, WebSocketTransport, type SocketLike } from "../src/lib/transport/websocket";
import { CommandError } from "../src/lib/transport/types";

class FakeSocket implements SocketLike {
  binaryType = "blob";
  readyState = 0;
  onopen: ((ev: unknown) => void) | null = null;
  onclose: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  sent: any[] = [];
  constructor(readonly url: string) {}
  send(data: string) {
    this.sent.push(JSON.parse(data));
  }
  close() {
    this.drop();
  }
  open() {
    this.readyState = 1;
    this.onopen?.({});
  }
  drop() {
    this.readyState = 3;
    this.onclose?.({});
  }
  reply(msg: unknown) {
    this.onmessage?.({ data: JSON.stringify(msg) });
  }
  commands() {
    return this.sent.filter((m) => m.type === "command" && m.id > 0);
  }
}

function setup(token: string | null = null) {
  const sockets: FakeSocket[] = [];
  const t = new WebSocketTransport("ws://h/ws", token, (url) => {
    const s = new FakeSocket(url);
    sockets.push(s);
    return s;
  });
  return { t, sockets };
}

const flush = () => new Promise((r) => setTimeout(r, 0));

afterEach(() => vi.useRealTimers());

describe("WebSocket transport", () => {
  it("matches responses to calls by id, in any order", async () => {
    const { t, sockets } = setup();
    const a = t.call("io.status");
    const b = t.call("project.get", { x: 1 });
    sockets[0].open();
    await flush();
    const [ca, cb] = sockets[0].commands();
    expect(ca).toMatchObject({ command: "io.status", params: {}, approved: false });
    expect(cb).toMatchObject({ command: "project.get", params: { x: 1 } });
    expect(ca.id).not.toBe(cb.id);
    sockets[0].reply({ type: "response", id: cb.id, success: true, result: "B" });
    sockets[0].reply({ type: "response", id: ca.id, success: true, result: "A" });
    await expect(a).resolves.toBe("A");
    await expect(b).resolves.toBe("B");
    expect(sockets[0].binaryType).toBe("arraybuffer");
  });

  it("turns error responses into CommandError with code and path", async () => {
    const { t, sockets } = setup();
    const p = t.call("project.dataset.update", {}, true);
    sockets[0].open();
    await flush();
    const c = sockets[0].commands()[0];
    expect(c.approved).toBe(true);
    sockets[0].reply({ type: "response", id: c.id, success: false, error: { code: "invalidParams", message: "bad", path: "/changes/min" } });
    const err = await p.catch((e) => e);
    expect(err).toBeInstanceOf(CommandError);
    expect(err).toMatchObject({ code: "invalidParams", message: "bad", path: "/changes/min" });
  });

  it("ignores garbage and responses to unknown ids", async () => {
    const { t, sockets } = setup();
    const p = t.call("io.status");
    sockets[0].open();
    await flush();
    sockets[0].onmessage?.({ data: "not json" });
    sockets[0].reply({ type: "response", id: 999, success: true, result: 1 });
    sockets[0].reply({ type: "response", id: sockets[0].commands()[0].id, success: true, result: 2 });
    await expect(p).resolves.toBe(2);
  });

  it("rejects calls in flight when the socket closes, without retrying them", async () => {
    const { t, sockets } = setup();
    const p = t.call("io.connect");
    sockets[0].open();
    await flush();
    sockets[0].drop();
    await expect(p).rejects.toThrow(/lost/);
    expect(sockets).toHaveLength(1);
  });

  it("fails a call when the server cannot be reached", async () => {
    const { t, sockets } = setup();
    const p = t.call("io.status");
    sockets[0].drop();
    await expect(p).rejects.toThrow(/cannot reach/);
  });

  it("sends auth first when opened with a token, then subscribes to events", async () => {
    const { t, sockets } = setup("secret");
    t.onEvent(() => {});
    sockets[0].open();
    expect(sockets[0].sent[0]).toEqual({ type: "auth", id: "auth", token: "secret" });
    expect(sockets[0].sent[1]).toMatchObject({ command: "api.subscribe", params: { events: true } });
  });

  it("says whether the page may act: no secret, a secret the server refused, or granted", async () => {
    expect(setup(null).t.access()).toBe("missing");
    const { t, sockets } = setup("old-secret");
    const seen: string[] = [];
    t.onAccess((a) => seen.push(a));
    t.onEvent(() => {});
    sockets[0].open();
    expect(t.access()).toBe("unknown");
    sockets[0].reply({ type: "response", id: "auth", success: false, error: { code: "notAllowed", message: "wrong token" } });
    expect(t.access()).toBe("refused");
    const fresh = setup("right");
    fresh.t.onEvent(() => {});
    fresh.sockets[0].open();
    fresh.sockets[0].reply({ type: "response", id: "auth", success: true, result: { authenticated: true } });
    expect(fresh.t.access()).toBe("granted");
    expect(seen).toEqual(["refused"]);
  });

  it("delivers events and binary frames", async () => {
    const { t, sockets } = setup();
    const events: unknown[] = [];
    t.onEvent((e) => events.push(e));
    const frames: ArrayBuffer[] = [];
    const opts = { refreshHz: 30, points: 500, timeRangeS: 5, raw: { 3: 1024 }, windows: {}, console: true };
    const started = t.display(opts, (f) => frames.push(f));
    sockets[0].open();
    await started;
    sockets[0].reply({ type: "event", event: { event: "projectChanged" } });
    const buf = new ArrayBuffer(8);
    sockets[0].onmessage?.({ data: buf });
    expect(events).toEqual([{ event: "projectChanged" }]);
    expect(frames[0]).toBe(buf);
    expect(sockets[0].sent.filter((m) => m.type === "display").at(-1)).toMatchObject({ refreshHz: 30, points: 500, timeRangeS: 5, raw: { 3: 1024 }, windows: {}, console: true });
  });

  it("re-sends the display request after a reconnect", async () => {
    vi.useFakeTimers();
    const { t, sockets } = setup();
    const opts = { refreshHz: 60, points: 1000, timeRangeS: 10, raw: {}, windows: {}, console: true };
    const started = t.display(opts, () => {});
    sockets[0].open();
    await started;
    sockets[0].drop();
    await vi.advanceTimersByTimeAsync(300);
    expect(sockets).toHaveLength(2);
    sockets[1].open();
    const display = sockets[1].sent.filter((m) => m.type === "display");
    expect(display).toHaveLength(1);
    expect(display[0]).toMatchObject({ refreshHz: 60, points: 1000, timeRangeS: 10 });
    // Events are re-subscribed too.
    expect(sockets[1].sent.some((m) => m.command === "api.subscribe")).toBe(true);
  });

  it("stopping the display sends stop once, and only for the current handler", async () => {
    const { t, sockets } = setup();
    const first = t.display({ refreshHz: 60, points: 10, timeRangeS: 1, raw: {}, windows: {}, console: true }, () => {});
    sockets[0].open();
    const stopFirst = await first;
    const stopSecond = await t.display({ refreshHz: 30, points: 10, timeRangeS: 1, raw: {}, windows: {}, console: true }, () => {});
    stopFirst();
    expect(sockets[0].sent.some((m) => m.stop)).toBe(false);
    stopSecond();
    expect(sockets[0].sent.filter((m) => m.stop)).toHaveLength(1);
  });

  it("sends a credentials request nested, so its fields cannot replace the message's type", async () => {
    const { t, sockets } = setup();
    const status = t.credentials({ op: "status", target: { kind: "source", id: "broker" } });
    sockets[0].open();
    await flush();
    const sent = sockets[0].sent.filter((m) => m.type === "credentials");
    expect(sent).toEqual([{ type: "credentials", id: sent[0].id, request: { op: "status", target: { kind: "source", id: "broker" } } }]);
    const answer = { password: true, caCertificate: false, clientCertificate: false, clientKey: false, savedFor: null, store: "keyring" };
    sockets[0].reply({ type: "response", id: sent[0].id, success: true, result: answer });
    await expect(status).resolves.toEqual(answer);
  });

  it("sends chat requests with an id and matches their responses like calls", async () => {
    const { t, sockets } = setup();
    const call = t.call("io.status");
    const send = t.chat({ op: "send", chat: 1, text: "add a gauge" });
    const list = t.chat<{ id: number }[]>({ op: "list" });
    sockets[0].open();
    await flush();
    const chats = sockets[0].sent.filter((m) => m.type === "chat");
    expect(chats).toHaveLength(2);
    expect(chats[0]).toEqual({ type: "chat", id: chats[0].id, op: "send", chat: 1, text: "add a gauge" });
    expect(Object.keys(chats[0]).slice(0, 2)).toEqual(["type", "id"]);
    // One id space for commands and chat requests.
    const ids = [sockets[0].commands()[0].id, chats[0].id, chats[1].id];
    expect(new Set(ids).size).toBe(3);
    sockets[0].reply({ type: "response", id: chats[1].id, success: true, result: [{ id: 4 }] });
    sockets[0].reply({ type: "response", id: chats[0].id, success: true, result: null });
    sockets[0].reply({ type: "response", id: ids[0], success: true, result: { connected: false } });
    await expect(list).resolves.toEqual([{ id: 4 }]);
    await expect(send).resolves.toBeNull();
    await expect(call).resolves.toEqual({ connected: false });
  });

  it("a chat request cannot override the message type or id", async () => {
    const { t, sockets } = setup();
    void t.chat({ op: "list", type: "command", id: 0 } as any);
    sockets[0].open();
    await flush();
    const m = sockets[0].sent.find((x) => x.op === "list");
    expect(m.type).toBe("chat");
    expect(m.id).toBeGreaterThan(0);
  });

  it("turns chat error responses into CommandError and rejects them when the socket drops", async () => {
    const { t, sockets } = setup();
    const refused = t.chat({ op: "delete", chat: 2 });
    const hanging = t.chat({ op: "listModels" });
    sockets[0].open();
    await flush();
    const [del] = sockets[0].sent.filter((m) => m.type === "chat");
    sockets[0].reply({ type: "response", id: del.id, success: false, error: { code: "turnRunning", message: "chat 2 already has a turn running" } });
    const err = await refused.catch((e) => e);
    expect(err).toBeInstanceOf(CommandError);
    expect(err).toMatchObject({ code: "turnRunning", message: "chat 2 already has a turn running" });
    sockets[0].drop();
    await expect(hanging).rejects.toThrow(/lost/);
  });

  it("onChat opens the connection and delivers chat events, apart from project events", async () => {
    const { t, sockets } = setup();
    const chat: unknown[] = [];
    const events: unknown[] = [];
    const off = t.onChat((e) => chat.push(e));
    expect(sockets).toHaveLength(1);
    t.onEvent((e) => events.push(e));
    sockets[0].open();
    sockets[0].reply({ type: "chatEvent", event: { chat: 1, type: "textDelta", text: "Hi" } });
    sockets[0].reply({ type: "event", event: { event: "projectChanged" } });
    sockets[0].reply({ type: "chatEvent" });
    expect(chat).toEqual([{ chat: 1, type: "textDelta", text: "Hi" }]);
    expect(events).toEqual([{ event: "projectChanged" }]);
    off();
    sockets[0].reply({ type: "chatEvent", event: { chat: 1, type: "turnEnded", end: "finished" } });
    expect(chat).toHaveLength(1);
    // No subscribe message is needed for chat events.
    expect(sockets[0].sent.filter((m) => m.type === "chat")).toEqual([]);
  });

  it("reconnects for chat handlers alone, and stops once they are gone", async () => {
    vi.useFakeTimers();
    const { t, sockets } = setup();
    const got: unknown[] = [];
    const off = t.onChat((e) => got.push(e));
    sockets[0].open();
    sockets[0].drop();
    await vi.advanceTimersByTimeAsync(300);
    expect(sockets).toHaveLength(2);
    sockets[1].open();
    sockets[1].reply({ type: "chatEvent", event: { chat: 3, type: "turnEnded", end: "cancelled", detail: null } });
    // The reconnect itself is announced first: events of the gap are lost, views re-read.
    expect(got).toEqual([
      { chat: -1, type: "resync" },
      { chat: 3, type: "turnEnded", end: "cancelled", detail: null },
    ]);
    off();
    sockets[1].drop();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(sockets).toHaveLength(2);
  });

  it("refuses a request past MAX_PENDING waiting at once, without sending it", async () => {
    const { t, sockets } = setup();
    const waiting = Array.from({ length: MAX_PENDING }, (_, i) => t.call("io.status", { i }));
    sockets[0].open();
    await flush();
    expect(sockets[0].commands()).toHaveLength(MAX_PENDING);
    const refused = t.call("io.status", { i: MAX_PENDING });
    await expect(refused).rejects.toThrow(`Not sent: ${MAX_PENDING} requests are already waiting for Sextant's answer`);
    expect(sockets[0].commands()).toHaveLength(MAX_PENDING);
    expect((t as any).pending.size).toBe(MAX_PENDING);
    // Once one is answered there is room again.
    const first = sockets[0].commands()[0];
    sockets[0].reply({ type: "response", id: first.id, success: true, result: "ok" });
    await expect(waiting[0]).resolves.toBe("ok");
    const next = t.call("io.status", { i: "next" });
    await flush();
    expect(sockets[0].commands().at(-1)).toMatchObject({ params: { i: "next" } });
    expect((t as any).pending.size).toBe(MAX_PENDING);
    sockets[0].drop();
    await expect(next).rejects.toThrow(/lost/);
    await Promise.allSettled(waiting);
  });

  it("a refusal by the server's rate limit answers the request it refused, by its id", async () => {
    const { t, sockets } = setup();
    const first = t.call("console.send", { data: "a" });
    const second = t.call("console.send", { data: "b" });
    sockets[0].open();
    await flush();
    const ids = sockets[0].sent.filter((m) => m.id > 0).map((m) => m.id);
    sockets[0].reply({ type: "response", id: ids[1], success: false, error: { code: "badRequest", message: "rate limit exceeded; slow down" } });
    await expect(second).rejects.toMatchObject({ code: "badRequest", message: "rate limit exceeded; slow down" });
    // A refusal of a message that had no id (display options) fails no request.
    sockets[0].reply({ type: "response", id: null, success: false, error: { code: "badRequest", message: "rate limit exceeded; slow down" } });
    expect([...(t as any).pending.keys()]).toEqual([ids[0]]);
    sockets[0].reply({ type: "response", id: ids[0], success: true, result: null });
    await expect(first).resolves.toBeNull();
  });

  it("forPage derives the URL and token from the page location", () => {
    const t = WebSocketTransport.forPage({ protocol: "https:", host: "box:7790", pathname: "/ui/index.html", search: "?token=abc" } as Location);
    expect((t as any).url).toBe("wss://box:7790/ui/ws");
    expect((t as any).token).toBe("abc");
  });

  it("keeps the server's secret for the tab: a reload without ?token= still proves it", () => {
    const kept = new Map<string, string>();
    const storage = {
      getItem: (k: string) => kept.get(k) ?? null,
      setItem: (k: string, v: string) => void kept.set(k, v),
    } as unknown as Storage;
    const page = { protocol: "http:", host: "127.0.0.1:7777", pathname: "/", hash: "" };
    const first = WebSocketTransport.forPage({ ...page, search: "?token=s3cret&x=1" } as Location, storage);
    expect((first as any).token).toBe("s3cret");
    const reload = WebSocketTransport.forPage({ ...page, search: "" } as Location, storage);
    expect((reload as any).token).toBe("s3cret");
    const otherTab = WebSocketTransport.forPage({ ...page, search: "" } as Location, null);
    expect((otherTab as any).token).toBeNull();
  });
});
