/** The Health view's numbers as text: pure helpers over the backend's health snapshot
 *  (`sextant_retrieval::diagnostics::Health`, generated type). */
import type { Health, Latency } from "../lib/wire/types.gen";

/** A latency in milliseconds; a dash when nothing was measured (never "0 ms"). */
export function formatMs(ms: number | null | undefined): string {
  if (ms == null || !Number.isFinite(ms)) return "—";
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 100) return `${ms.toFixed(1)} ms`;
  return `${Math.round(ms)} ms`;
}

/** The stages in the order a retrieval runs them. */
export const STAGES = ["keyword", "query_embedding", "vector", "authoritative_revalidation", "assembly", "total"] as const;
export const OUTCOMES = ["completed", "disabled", "empty_query", "cancelled", "failed"] as const;

/** Per-stage latency of the most recently used scope (the first), every stage present. */
export function latestLatency(h: Health): { stage: (typeof STAGES)[number]; latency: Latency }[] {
  const latest = h.scopes[0];
  const empty: Latency = { samples: 0, p50Ms: null, p95Ms: null, maxMs: null };
  return STAGES.map((stage) => ({ stage, latency: (latest?.latency as Record<string, Latency> | undefined)?.[stage] ?? empty }));
}

/** A count map summed over every tracked scope (each key present, zero-filled). */
export function sumOverScopes(h: Health, field: "degradations" | "outcomes" | "purposes"): [string, number][] {
  const total = new Map<string, number>();
  for (const s of h.scopes) {
    for (const [k, v] of Object.entries(s[field] as Record<string, number>)) total.set(k, (total.get(k) ?? 0) + v);
  }
  return [...total.entries()];
}
