import { describe, expect, it } from "vitest";
import { formatMs, latestLatency, sumOverScopes } from "../src/chat/health";
import type { Health } from "../src/lib/wire/types.gen";

const zero = (keys: string[]) => Object.fromEntries(keys.map((k) => [k, 0]));
const stages = ["keyword", "query_embedding", "vector", "authoritative_revalidation", "assembly", "total"];
const none = { samples: 0, p50Ms: null, p95Ms: null, maxMs: null };

function health(scopes: Health["scopes"]): Health {
  return {
    generatedUnixMs: 1,
    embedder: { kind: "lexicon", fallback: "modelNotFound", dimensions: 128, breaker: null },
    scopeCapacity: 64,
    scopeTtlMs: 86_400_000,
    scopesEvicted: 0,
    scopesExpired: 0,
    scopes,
    process: {
      outcomes: zero(["completed", "disabled", "empty_query", "cancelled", "failed"]) as Health["process"]["outcomes"],
      gauges: {
        extractionQueueDepth: 0, extractionOldestAgeMs: 0, embeddingBacklog: 0, openStores: 0, openStoresHighWater: 0,
        providerQueued: 0, providerAdmitted: 0, providerRateLimited: 0, providerCapacityRejected: 0, providerDeadline: 0,
        providerAborted: 0, providerLateSettled: 0,
      },
    },
  } as Health;
}

function scope(latency: Record<string, unknown>, degradations: Record<string, number>) {
  return {
    ageMs: 1, idleMs: 1,
    latency: { ...Object.fromEntries(stages.map((s) => [s, none])), ...latency },
    purposes: zero(["recall", "decision", "search", "injection"]),
    outcomes: zero(["completed", "disabled", "empty_query", "cancelled", "failed"]),
    degradations: { ...zero(["vector_cold", "embedding_error"]), ...degradations },
  } as unknown as Health["scopes"][number];
}

describe("the Health view's numbers", () => {
  it("shows a dash for a latency nobody measured, never 0 ms", () => {
    expect(formatMs(null)).toBe("—");
    expect(formatMs(undefined)).toBe("—");
    expect(formatMs(Number.NaN)).toBe("—");
    expect(formatMs(0)).toBe("0.00 ms");
    expect(formatMs(0.456)).toBe("0.46 ms");
    expect(formatMs(12.34)).toBe("12.3 ms");
    expect(formatMs(1234.5)).toBe("1235 ms");
  });

  it("lists every stage of the most recent scope, dashes where empty", () => {
    expect(latestLatency(health([])).map((r) => r.latency.p50Ms)).toEqual([null, null, null, null, null, null]);
    const rows = latestLatency(health([scope({ keyword: { samples: 3, p50Ms: 0.1, p95Ms: 0.2, maxMs: 0.3 } }, {})]));
    expect(rows.map((r) => r.stage)).toEqual(stages);
    expect(rows[0].latency.p95Ms).toBe(0.2);
    expect(rows[1].latency.p95Ms).toBeNull();
  });

  it("sums counts over scopes, keeping every key", () => {
    const h = health([scope({}, { vector_cold: 2 }), scope({}, { vector_cold: 1, embedding_error: 4 })]);
    expect(Object.fromEntries(sumOverScopes(h, "degradations"))).toEqual({ vector_cold: 3, embedding_error: 4 });
  });
});
