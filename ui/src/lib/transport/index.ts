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
let page: WebSocketTransport | null = null;

export function transport(): Transport {
  if (!current) {
    page = isTauri() ? null : WebSocketTransport.forPage();
    current = withConsent(page ?? new TauriTransport(), consent.ask);
  }
  return current;
}

/** Whether this page may act (a served page must hold the server's secret; the desktop
 * app's own window always may), and a way to hear when that changes. */
export function pageAccess(): { now: PageAccess; on: (h: (a: PageAccess) => void) => () => void } {
  transport();
  if (!page) return { now: "granted", on: () => () => {} };
  const p = page;
  return { now: p.access(), on: (h) => p.onAccess(h) };
}

export type { PageAccess } from "./websocket";
import type { PageAccess } from "./websocket";
