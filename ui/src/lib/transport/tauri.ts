/** The desktop transport: `invoke` for commands and chat requests, `Channel`s for events,
 *  chat events and display frames. */
import { Channel, invoke } from "@tauri-apps/api/core";
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

/** An `invoke` rejection as a CommandError: the backend's `{code, message, path?}`, or its text. */
function commandError(e: unknown): CommandError {
  if (e && typeof e === "object" && "message" in e) return new CommandError(e as any);
  return new CommandError({ code: "failed", message: String(e) });
}

export class TauriTransport implements Transport {
  readonly kind = "tauri" as const;
  private events = new Set<(e: BackendEvent) => void>();
  private eventChannel: Channel<BackendEvent> | null = null;
  private chats = new Set<(e: ChatEvent) => void>();
  private chatChannel: Channel<ChatEvent> | null = null;

  async call<T = unknown>(command: string, params: unknown = {}, approved = false): Promise<T> {
    try {
      return await invoke<T>("call", { command, params: params ?? {}, approved });
    } catch (e) {
      throw commandError(e);
    }
  }

  async chat<T = unknown>(request: ChatRequest): Promise<T> {
    try {
      return await invoke<T>("chat", { request });
    } catch (e) {
      throw commandError(e);
    }
  }

  async credentials(request: CredentialsRequest): Promise<CredentialStatus> {
    try {
      return await invoke<CredentialStatus>("source_credentials", { request });
    } catch (e) {
      throw commandError(e);
    }
  }

  onChat(handler: (e: ChatEvent) => void): Unsubscribe {
    this.chats.add(handler);
    if (!this.chatChannel) {
      const channel = new Channel<ChatEvent>();
      channel.onmessage = (e) => this.chats.forEach((h) => h(e));
      this.chatChannel = channel;
      // A backend without the chat service refuses; the next handler tries again.
      invoke("subscribe_chat", { channel }).catch(() => {
        if (this.chatChannel === channel) this.chatChannel = null;
      });
    }
    return () => this.chats.delete(handler);
  }

  onEvent(handler: (e: BackendEvent) => void): Unsubscribe {
    this.events.add(handler);
    if (!this.eventChannel) {
      const channel = new Channel<BackendEvent>();
      channel.onmessage = (e) => this.events.forEach((h) => h(e));
      this.eventChannel = channel;
      void invoke("subscribe_events", { channel });
    }
    return () => this.events.delete(handler);
  }

  async display(options: DisplayOptions, handler: (frame: ArrayBuffer) => void): Promise<Unsubscribe> {
    const channel = new Channel<ArrayBuffer>();
    let live = true;
    channel.onmessage = (frame) => {
      if (live) handler(frame instanceof ArrayBuffer ? frame : new Uint8Array(frame as any).buffer);
    };
    const id = await invoke<number>("display", { channel, options });
    return () => {
      live = false;
      void invoke("display_stop", { id });
    };
  }

  firstFrameDrawn() {
    invoke("first_frame_drawn", { pageMs: performance.now() }).catch(() => {});
  }
}
