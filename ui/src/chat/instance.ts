/** The one chat store of the app, made on first use (when the panel first opens) and kept
 *  for the app's life, so closing the panel loses nothing and a running turn keeps
 *  streaming into it. */
import { transport } from "../lib/transport";
import { ChatStore } from "./store.svelte";

let store: ChatStore | null = null;

export function chatStore(): ChatStore {
  if (!store) {
    store = new ChatStore(transport());
    store.start();
  }
  return store;
}
