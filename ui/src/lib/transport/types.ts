/** What the UI needs from a backend: commands, pushed events, binary display frames and
 *  the assistant's chats.
 *  Two implementations with the same meaning: Tauri (desktop) and WebSocket (`sextant serve`).
 *  See docs/ui-protocol.md. */

import type { ChatRequest, CredentialStatus, CredentialsRequest, DisplayOptions, Question, ServiceEvent } from "../wire/types.gen";

/** What a page asks the display for (`refreshHz`, `points`, `timeRangeS`, `raw`), generated
 *  from `sextant_display::DisplayOptions`; its rate bounds are `lib/display/limits.gen.ts`. */
export type { DisplayOptions };

export interface CommandErrorInfo {
  code: string;
  message: string;
  path?: string;
  /** With `needsConfirmation`: the question, as data to word in the person's language. */
  question?: Question | null;
}

/** A failed command, with the backend's error code, message and (for bad params) path. */
export class CommandError extends Error {
  readonly code: string;
  readonly path?: string;
  readonly question?: Question;
  constructor(info: CommandErrorInfo) {
    super(info.message);
    this.name = "CommandError";
    // The wire's camelCase; an older backend spelled codes in snake_case.
    this.code = info.code.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    this.path = info.path;
    this.question = info.question ?? undefined;
  }
}

export interface BackendEvent {
  event: string;
  [key: string]: unknown;
}

export type Unsubscribe = () => void;

/** A request to the assistant's chat service (docs/ui-protocol.md, "The assistant's chats"):
 *  generated from the chat door's table of ops, one shape per op. */
export type { ChatRequest };

/** A live event of one chat: `{chat, type, …}` (textDelta, toolCallDone, turnEnded, …).
 *  The WebSocket transport adds `{chat: -1, type: "resync"}` after a reconnect: events may
 *  have been missed, so views re-read the chats they show. */
export type ChatEvent = ServiceEvent | { chat: number; type: "resync" };

export interface Transport {
  readonly kind: "tauri" | "websocket";
  /** Runs a registry command; rejects with CommandError. `approved`: a person confirmed. */
  call<T = unknown>(command: string, params?: unknown, approved?: boolean): Promise<T>;
  /** Pushed project/connection events. */
  onEvent(handler: (e: BackendEvent) => void): Unsubscribe;
  /** A request to the chat service (not a registry command); rejects with CommandError. */
  chat<T = unknown>(request: ChatRequest): Promise<T>;
  /** Every chat's live events. */
  onChat(handler: (e: ChatEvent) => void): Unsubscribe;
  /** The sources' passwords and certificates (a person's door only, never a registry
   *  command): which parts are saved, never a value. Rejects with CommandError. */
  credentials(request: CredentialsRequest): Promise<CredentialStatus>;
  /** Starts (or re-configures) display frames; each arrives as an ArrayBuffer. */
  display(options: DisplayOptions, handler: (frame: ArrayBuffer) => void): Promise<Unsubscribe>;
  /** The first frame with a device's data is on screen: the desktop app logs its start-up
   *  time; a served page has nobody to tell. Best effort, never throws. */
  firstFrameDrawn(): void;
}
