/** The assistant's mechanisms as the panel shows them: one entry per mechanism, keyed by
 *  the Rust settings type (`Mechanisms`, generated into `lib/wire/types.gen.ts`). The entry
 *  list `satisfies` a record over that type's keys, so a mechanism added in Rust without a
 *  toggle here – or a toggle for one Rust no longer has – does not compile; the settings
 *  form, its request and the panel's toggles all come from this list. */
import type { Mechanisms } from "../lib/wire/types.gen";

export type Mechanism = keyof Mechanisms;

/** Each mechanism's test id (`chat-<id>`); its strings are `chat.settings.<key>` and
 *  `chat.settings.<key>Hint`. Listed in the order the panel shows them. */
export const MECHANISMS = {
  memory: { id: "memory" },
  contextProbe: { id: "context-probe" },
  handoffSeeding: { id: "handoff-seeding" },
  skillRouting: { id: "skill-routing" },
  autoVerify: { id: "auto-verify" },
  archiveTools: { id: "archive-tools" },
  focusPrompt: { id: "focus-prompt" },
  intentNarrowing: { id: "intent-narrowing" },
  toolResultCompression: { id: "tool-result-compression" },
  topicCompaction: { id: "topic-compaction" },
  topicMarker: { id: "topic-marker" },
} as const satisfies Record<Mechanism, { id: string }>;

/** Every mechanism, in the panel's order. */
export const MECHANISM_KEYS = Object.keys(MECHANISMS) as Mechanism[];

/** The mechanisms of `source`, every one of them (on by default where it says nothing). */
export function mechanismsOf(source: Partial<Mechanisms> | null | undefined): Mechanisms {
  return Object.fromEntries(MECHANISM_KEYS.map((k) => [k, source?.[k] ?? true])) as unknown as Mechanisms;
}
