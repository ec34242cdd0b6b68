/** The WebSocket transport for `sextant serve`: JSON text frames for commands, events and
 *  the assistant's chats, binary frames for display data. Reconnects with backoff; calls
 *  and chat requests in flight when the socket drops are rejected (never silently retried:
 *  a command may have side effects). */
import {
  CommandError,
  type BackendEvent,
  type ChatEvent,
  type ChatRequest,
  type DisplayOptions,
  type Transport,
  type Unsubscribe,
} from "./types";
import type { CredentialStatus, CredentialsRequest } from "../wire/types.gen";
import { t } from "../i18n/index.svelte";

type Pending = { resolve: (v: unknown) => void; reject: (e: Error) => void };

/** The minimal WebSocket surface used, so tests can pass a fake constructor. */
export interface SocketLike {
  binaryType: string;
  readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onclose: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  send(data: string): void;
  close(): void;
}
export type SocketFactory = (url: string) => SocketLike;

/** The `chat` of the transport's own `resync` event (not a real chat id). */
export const RESYNC_CHAT = -1;

/** Requests waiting for their answer at once, at most. One past it is refused at once (never
 *  sent): a page that sends far faster than the server answers is stuck, and each entry
 *  would otherwise be kept until the socket drops. The server's own burst is 1000
 *  messages, so an ordinary page never comes near it. */
export const MAX_PENDING = 1024;

export class WebSocketTransport implements Transport {
  readonly kind = "websocket" as const;
  private socket: SocketLike | null = null;
  private opened: Promise<void> | null = null;
  private nextId = 1;
  private pending = new Map<number, Pending>();
  private events = new Set<(e: BackendEvent) => void>();
  /** Chat events need no subscribe message: the server sends them to every connection. */
  private chats = new Set<(e: ChatEvent) => void>();
  private frames: ((f: ArrayBuffer) => void) | null = null;
  private displayOptions: DisplayOptions | null = null;
  private retryMs = 250;
  private everOpened = false;
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly token: string | null = null,
    private readonly factory: SocketFactory = (u) => new WebSocket(u) as unknown as SocketLike,
  ) {}

  /** The URL of `/ws` next to the page, and the server's secret: the `?token=` the page
   * was opened with (printed by `sextant serve`), kept for this tab only and taken out of
   * the address bar so it does not linger in history or screenshots. */
  static forPage(loc: Location = window.location, storage: Storage | null = tabStorage()): WebSocketTransport {
    const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
    const base = loc.pathname.replace(/[^/]*$/, "");
    const token = pageSecret(loc, storage);
    return new WebSocketTransport(`${scheme}//${loc.host}${base}ws`, token);
  }

  private connect(): Promise<void> {
    if (this.opened) return this.opened;
    this.opened = new Promise<void>((resolve, reject) => {
      const socket = this.factory(this.url);
      socket.binaryType = "arraybuffer";
      this.socket = socket;
      let isOpen = false;
      socket.onopen = () => {
        isOpen = true;
        this.retryMs = 250;
        if (this.token) this.raw({ type: "auth", id: AUTH_ID, token: this.token });
        // Events are always wanted; display resumes with its last options.
        this.raw({ type: "command", id: 0, command: "api.subscribe", params: { frames: false, events: true } });
        if (this.displayOptions) this.raw({ type: "display", id: 0, ...this.displayOptions });
        // Chat events sent while the socket was down are gone: tell the chat views to
        // re-read what they show (the server's history is the truth).
        if (this.everOpened) for (const h of this.chats) h({ chat: RESYNC_CHAT, type: "resync" });
        this.everOpened = true;
        resolve();
      };
      socket.onmessage = (ev) => this.receive(ev.data);
      socket.onclose = () => {
        this.socket = null;
        this.opened = null;
        const lost = new Error("connection to Sextant lost");
        for (const p of this.pending.values()) p.reject(lost);
        this.pending.clear();
        if (!isOpen) reject(new Error(`cannot reach Sextant at ${this.url}`));
        if (!this.closed && (this.events.size > 0 || this.chats.size > 0 || this.frames)) {
          setTimeout(() => void this.connect().catch(() => {}), this.retryMs);
          this.retryMs = Math.min(this.retryMs * 2, 5000);
        }
      };
    });
    return this.opened;
  }

  private raw(msg: unknown) {
    this.socket?.send(JSON.stringify(msg));
  }

  private receive(data: unknown) {
    if (data instanceof ArrayBuffer) {
      this.frames?.(data);
      return;
    }
    let msg: any;
    try {
      msg = JSON.parse(String(data));
    } catch {
      return;
    }
    if (msg.type === "event" && msg.event) {
      for (const h of this.events) h(msg.event as BackendEvent);
      return;
    }
    if (msg.type === "chatEvent" && msg.event && typeof msg.event === "object") {
      for (const h of this.chats) h(msg.event as ChatEvent);
      return;
    }
    if (msg.type === "response" && msg.id === AUTH_ID) {
      this.setAccess(msg.success ? "granted" : "refused");
      return;
    }
    if (msg.type === "response" && typeof msg.id === "number" && msg.id > 0) {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.success) p.resolve(msg.result);
      else p.reject(new CommandError(msg.error ?? { code: "failed", message: "unknown error" }));
    }
  }

  /** Sends `build(id)` with a fresh id and waits for the response with that id. */
  private async request<T>(build: (id: number) => Record<string, unknown>): Promise<T> {
    await this.connect();
    if (this.pending.size >= MAX_PENDING) throw new Error(t("transport.tooManyWaiting", { max: MAX_PENDING }));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.raw(build(id));
    });
  }

  call<T = unknown>(command: string, params: unknown = {}, approved = false): Promise<T> {
    return this.request<T>((id) => ({ type: "command", id, command, params: params ?? {}, approved }));
  }

  chat<T = unknown>(request: ChatRequest): Promise<T> {
    // `type` and `id` first on the wire and set again last, so a stray field in the
    // request cannot replace them.
    return this.request<T>((id) => Object.assign({ type: "chat", id }, request, { type: "chat", id }));
  }

  credentials(request: CredentialsRequest): Promise<CredentialStatus> {
    return this.request<CredentialStatus>((id) => ({ type: "credentials", id, request }));
  }

  onChat(handler: (e: ChatEvent) => void): Unsubscribe {
    this.chats.add(handler);
    void this.connect().catch(() => {});
    return () => this.chats.delete(handler);
  }

  onEvent(handler: (e: BackendEvent) => void): Unsubscribe {
    this.events.add(handler);
    void this.connect().catch(() => {});
    return () => this.events.delete(handler);
  }

  async display(options: DisplayOptions, handler: (frame: ArrayBuffer) => void): Promise<Unsubscribe> {
    this.frames = handler;
    this.displayOptions = options;
    await this.connect();
    this.raw({ type: "display", id: 0, ...options });
    return () => {
      if (this.frames === handler) {
        this.frames = null;
        this.displayOptions = null;
        this.raw({ type: "display", id: 0, stop: true });
      }
    };
  }

  firstFrameDrawn() {}

  close() {
    this.closed = true;
    this.socket?.close();
  }

  /** Whether this page may act: it needs the server's secret (`missing` without one, and
   * `refused` when the server does not know it – restarted, or an old address). */
  access(): PageAccess {
    return this.token ? this.accessState : "missing";
  }

  /** Calls `handler` whenever {@link access} changes. */
  onAccess(handler: (access: PageAccess) => void): Unsubscribe {
    this.accessHandlers.add(handler);
    return () => this.accessHandlers.delete(handler);
  }

  private accessState: PageAccess = "unknown";
  private accessHandlers = new Set<(access: PageAccess) => void>();

  private setAccess(state: PageAccess) {
    if (state === this.accessState) return;
    this.accessState = state;
    for (const h of this.accessHandlers) h(state);
  }
}

/** Whether the page may act on the server: see {@link WebSocketTransport.access}. */
export type PageAccess = "unknown" | "granted" | "missing" | "refused";

/** The id of the secret's proof, so its answer is told apart from every request's. */
const AUTH_ID = "auth";

/** Where this tab keeps the server's secret (per tab, gone when it closes). */
const SECRET_KEY = "sextant.serverSecret";

function tabStorage(): Storage | null {
  try {
    return window.sessionStorage;
  } catch {
    return null;
  }
}

/** The secret from the address (then kept for the tab and removed from the address), or
 * the one this tab kept from an earlier load. */
export function pageSecret(loc: Location, storage: Storage | null): string | null {
  const params = new URLSearchParams(loc.search);
  const fromUrl = params.get("token");
  if (fromUrl) {
    storage?.setItem(SECRET_KEY, fromUrl);
    params.delete("token");
    const rest = params.toString();
    try {
      history.replaceState(history.state, "", `${loc.pathname}${rest ? `?${rest}` : ""}${loc.hash}`);
    } catch {
      // Not in a browser (tests): the address stays as it is.
    }
    return fromUrl;
  }
  return storage?.getItem(SECRET_KEY) ?? null;
}
