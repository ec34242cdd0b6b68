/** Picks the transport for where the UI runs: inside the desktop app or in a browser. */
import { consent } from "../consent.svelte";
import { withConsent } from "./consent";
import { TauriTransport } from "./tauri";
import type { Transport } from "./types";
import { WebSocketTransport } from "./websocket";

export * from "./types";

export function isTauri(): boolean {
  return typeof window !== "undefined" && "__TAURI_INTERNALS__" in window;
}

let current: Transport | null = null;

export function transport(): Transport {
  current ??= withConsent(isTauri() ? new TauriTransport() : WebSocketTransport.forPage(), consent.ask);
  return current;
}
