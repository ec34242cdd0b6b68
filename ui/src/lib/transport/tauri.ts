/** The desktop transport: `invoke` for commands, `Channel`s for events and display frames. */
import { Channel, invoke } from "@tauri-apps/api/core";
import {
  CommandError,
  type BackendEvent,
  type DisplayOptions,
  type Transport,
  type Unsubscribe,
} from "./types";

export class TauriTransport implements Transport {
  readonly kind = "tauri" as const;
  private events = new Set<(e: BackendEvent) => void>();
  private eventChannel: Channel<BackendEvent> | null = null;

  async call<T = unknown>(command: string, params: unknown = {}, approved = false): Promise<T> {
    try {
      return await invoke<T>("call", { command, params: params ?? {}, approved });
    } catch (e: any) {
      if (e && typeof e === "object" && "message" in e) throw new CommandError(e);
      throw new CommandError({ code: "failed", message: String(e) });
    }
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
}
